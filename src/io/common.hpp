// Shared by the file readers and writers: one-line errors naming the file, overflow-checked
// size arithmetic, UTF-8 validation and a small parallel loop.
#pragma once

#include <fmt/format.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "quanta/error.hpp"

namespace quanta::io {
enum class GgufType : uint32_t;
}  // namespace quanta::io

namespace quanta::io::detail {

static_assert(std::endian::native == std::endian::little,
              "quanta's file readers assume a little-endian host (as the formats are)");

// "[quanta::<where>] <file>: <message>"
[[noreturn]] inline void fail(std::string_view where, std::string_view file, std::string message) {
  throw Error(fmt::format("[quanta::{}] {}: {}", where, file, message));
}

// a * b and a + b, or nullopt-like failure through `ok`.
inline bool mul_ok(uint64_t a, uint64_t b, uint64_t& r) {
  return !__builtin_mul_overflow(a, b, &r);
}
inline bool add_ok(uint64_t a, uint64_t b, uint64_t& r) {
  return !__builtin_add_overflow(a, b, &r);
}

// Valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool valid_utf8(std::string_view s);

// Printable form of untrusted text for messages: at most `max` bytes, control and non-UTF-8
// bytes escaped.
std::string printable(std::string_view s, std::size_t max = 80);

// Runs fn(i) for i in [0, n) on up to `threads` threads (0 = all cores); the first exception
// thrown is rethrown after every worker stopped.
void parallel_for(int64_t n, int threads, const std::function<void(int64_t)>& fn);
int resolve_threads(int threads);

// Bytes of one GGUF scalar value; 0 for strings and arrays.
std::size_t gguf_scalar_size(GgufType t);

}  // namespace quanta::io::detail
