#pragma once

#include <cstddef>
#include <string>

namespace quanta::probe {

struct RoofResult {
  double median_gbs = 0, best_gbs = 0;
  int loop = 0;  // the prefetch choice with the fastest median (0 none, 1 L1, 2 L2)
  std::string isa;
};

// A filled buffer to stream (kept across calls so interleaved roof runs cost no set-up).
class RoofBuffer {
 public:
  explicit RoofBuffer(std::size_t bytes);
  ~RoofBuffer();
  RoofBuffer(const RoofBuffer&) = delete;
  RoofBuffer& operator=(const RoofBuffer&) = delete;
  const float* data() const { return p_; }
  std::size_t floats() const { return n_; }

 private:
  float* p_ = nullptr;
  std::size_t n_ = 0;
};

// Streams the first `bytes` of `buf` with `threads` threads, `reps` times with each of the
// three prefetch choices in turn; the choice with the fastest median, and GB/s of its median
// and best run.
RoofResult read_roof(std::size_t bytes, int threads, int reps, const RoofBuffer& buf);

// One pass with prefetch choice `loop` (RoofResult::loop), in GB/s: the sample a kernel's run is
// alternated with, so both are single runs and their medians compare like with like.
double roof_pass(std::size_t bytes, int threads, int loop, const RoofBuffer& buf);

}  // namespace quanta::probe
