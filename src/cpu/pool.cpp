#include "cpu/pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <cstdlib>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace quanta::cpu {

int hardware_threads() {
  static const int n = [] {
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
#endif
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return n;
}

int resolve_threads(int requested) {
  return requested > 0 ? std::min(requested, 256) : hardware_threads();
}

namespace {

// QUANTA_CPU_PIN=1 pins worker i to the i-th CPU this process may use (the caller of the first
// parallel call is worker 0). Off by default; benchmarks on a shared machine use it so the
// scheduler cannot stack both workers on one core.
void pin_worker(int worker) {
#if defined(__linux__)
  // The process's CPUs, read before any worker is pinned (a helper inherits its creator's).
  static const std::vector<int> cpus = [] {
    std::vector<int> v;
    const char* e = std::getenv("QUANTA_CPU_PIN");
    cpu_set_t allowed;
    if (e == nullptr || e[0] != '1' || sched_getaffinity(0, sizeof allowed, &allowed) != 0)
      return v;
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &allowed)) v.push_back(c);
    return v;
  }();
  if (cpus.empty()) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[static_cast<std::size_t>(worker) % cpus.size()], &one);
  pthread_setaffinity_np(pthread_self(), sizeof one, &one);
#else
  (void)worker;
#endif
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// How long an idle helper polls before it sleeps: long enough to catch the next call of a
// decode loop, short enough not to steal a shared 2-core machine for long.
constexpr auto kSpin = std::chrono::microseconds(200);

class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      generation_.fetch_add(1);
    }
    cv_work_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  void run(int64_t tasks, int workers, TaskFn fn, void* ctx) {
    std::unique_lock job(job_mu_, std::try_to_lock);
    if (!job.owns_lock() || workers <= 1 || tasks <= 1) {
      for (int64_t t = 0; t < tasks; ++t) fn(ctx, t, 0);
      return;
    }
    workers = static_cast<int>(std::min<int64_t>(workers, tasks));
    static thread_local const bool pinned = (pin_worker(0), true);
    (void)pinned;
    grow(workers - 1);
    fn_ = fn;
    ctx_ = ctx;
    tasks_ = tasks;
    next_.store(0);
    helpers_ = workers - 1;
    pending_.store(workers - 1);
    {
      std::lock_guard lock(mu_);
      generation_.fetch_add(1);
    }
    cv_work_.notify_all();
    work(0);
    const auto until = std::chrono::steady_clock::now() + kSpin;
    while (pending_.load() != 0 && std::chrono::steady_clock::now() < until) cpu_relax();
    if (pending_.load() != 0) {
      std::unique_lock lock(mu_);
      cv_done_.wait(lock, [&] { return pending_.load() == 0; });
    }
  }

 private:
  void work(int worker) {
    for (int64_t t = next_.fetch_add(1); t < tasks_; t = next_.fetch_add(1)) fn_(ctx_, t, worker);
  }

  void grow(int helpers) {
    while (static_cast<int>(threads_.size()) < helpers) {
      // The new helper must see the coming job as new: it starts from today's generation.
      const int id = static_cast<int>(threads_.size()) + 1;
      const uint64_t seen = generation_.load();
      threads_.emplace_back([this, id, seen] { loop(id, seen); });
    }
  }

  void loop(int id, uint64_t seen) {
    pin_worker(id);
    for (;;) {
      const auto until = std::chrono::steady_clock::now() + kSpin;
      while (generation_.load() == seen && std::chrono::steady_clock::now() < until) cpu_relax();
      if (generation_.load() == seen) {
        std::unique_lock lock(mu_);
        cv_work_.wait(lock, [&] { return generation_.load() != seen; });
      }
      seen = generation_.load();
      if (stop_) return;
      if (id > helpers_) continue;
      work(id);
      if (pending_.fetch_sub(1) == 1) {
        std::lock_guard lock(mu_);
        cv_done_.notify_one();
      }
    }
  }

  std::mutex job_mu_;  // one job at a time
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> next_{0};
  std::atomic<int> pending_{0};
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t tasks_ = 0;
  int helpers_ = 0;
  bool stop_ = false;
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

void parallel_for(int64_t tasks, int workers, TaskFn fn, void* ctx) {
  if (tasks <= 0) return;
  pool().run(tasks, workers, fn, ctx);
}

}  // namespace quanta::cpu
