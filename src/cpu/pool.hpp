// A small persistent thread pool for the CPU kernels: the caller is worker 0, helpers sleep on
// a condition variable between jobs (after a short spin, so back-to-back matmuls do not pay a
// wake-up each). One job runs at a time; a nested or concurrent call runs on its caller alone.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

namespace quanta::cpu {

// CPUs this process may run on (sched_getaffinity), at least 1.
int hardware_threads();

// Context::threads -> worker count: 0 means hardware_threads(); negative is treated as 0.
int resolve_threads(int requested);

using TaskFn = void (*)(void* ctx, int64_t task, int worker);

// Runs fn(ctx, t, worker) for every t in [0, tasks), each exactly once, on up to `workers`
// threads (worker ids in [0, workers)); tasks are handed out in increasing order on demand.
// Returns when all have finished. `fn` must not throw.
void parallel_for(int64_t tasks, int workers, TaskFn fn, void* ctx);

template <class Fn>
void parallel_for(int64_t tasks, int workers, Fn&& fn) {
  using F = std::remove_reference_t<Fn>;
  parallel_for(
      tasks, workers, [](void* c, int64_t t, int w) { (*static_cast<F*>(c))(t, w); },
      const_cast<void*>(static_cast<const void*>(&fn)));
}

}  // namespace quanta::cpu
