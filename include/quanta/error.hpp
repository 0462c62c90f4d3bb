// The one exception type quanta throws. Messages name the operation, the argument,
// the value found and the rule it broke, e.g.
//   [quanta::matmul] w: K = 4100 is not a multiple of group_size = 64 (affine, 4-bit)
#pragma once

#include <stdexcept>
#include <string>

namespace quanta {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A valid request that no kernel or build can serve (e.g. CUDA op in a CPU-only build).
class NotSupported : public Error {
 public:
  using Error::Error;
};

}  // namespace quanta
