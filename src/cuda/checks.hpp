// Host-side guards every CUDA entry point runs before a launch: the buffers really are device
// memory (a declared Location is only a promise), pointers meet the alignment a fast path
// loads with, and device-side flags (bad expert ids) become quanta::Error after the launch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "quanta/matrix.hpp"
#include "quanta/ops.hpp"

namespace quanta::cuda {

// Throws quanta::Error "[quanta::<op>] <arg>: pointer ... is host memory ..." unless p is
// device (or managed) memory.
void require_device_pointer(const void* p, std::string_view op, std::string_view arg);

// x, y, w's buffers and (when given) expert_ids.
void require_device_operands(const ConstMatrixView& x, const QuantizedMatrix& w,
                             const int32_t* expert_ids, const MatrixView& y, std::string_view op);
void require_device_weights(const QuantizedMatrix& w, std::string_view op);

inline bool is_aligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

// A fast path that needs `bytes`-aligned `arg`: true when it is; otherwise false when the
// kernel was chosen automatically (the caller then runs the generic kernel) and a
// quanta::Error naming the argument when the kernel was forced by name.
bool alignment_ok(const void* p, std::size_t bytes, const Context& ctx, std::string_view kernel,
                  std::string_view op, std::string_view arg);

// Device flag buffer for gather kernels: cleared before the launch, checked after it.
struct ExpertFlag {
  int* device = nullptr;  // set by kernels when an id is outside [0, batch)
};
ExpertFlag expert_flag_begin(const Context& ctx);
// Waits for the stream and throws quanta::Error naming expert_ids if the flag was set. While the
// stream is being captured into a graph it cannot wait: the rows stay NaN and nothing is thrown.
void expert_flag_end(const ExpertFlag& f, const Context& ctx, int64_t batch, std::string_view op);

}  // namespace quanta::cuda
