// Helpers for the io tests: crafted files in memory, temporary directories, error checks.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "quanta/error.hpp"
#include "quanta/io.hpp"

namespace quanta::test {

inline std::vector<std::byte> to_bytes(std::string_view s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

// A safetensors file from a header text and data bytes.
inline std::vector<std::byte> safetensors_bytes(std::string_view header,
                                                std::vector<std::byte> data = {}) {
  std::vector<std::byte> out(8);
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  const auto h = to_bytes(header);
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// The message of the quanta::Error thrown by fn, or "" (with a test failure) if none.
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-quanta exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

// Parse errors must be one line naming the file and containing `needle`.
#define EXPECT_FILE_ERROR(expr, file, needle)                                 \
  do {                                                                        \
    const std::string msg_ = ::quanta::test::error_of([&] { (void)(expr); }); \
    EXPECT_NE(msg_.find(file), std::string::npos) << msg_;                    \
    EXPECT_NE(msg_.find(needle), std::string::npos) << msg_;                  \
    EXPECT_EQ(msg_.find('\n'), std::string::npos) << msg_;                    \
  } while (0)

// Both borrow `b`: it must outlive the returned file.
inline io::SafetensorsFile parse_st(const std::vector<std::byte>& b,
                                    std::string name = "crafted.safetensors") {
  return io::SafetensorsFile::parse(io::MappedFile::borrow(b, std::move(name)));
}
inline io::GgufFile parse_gguf(const std::vector<std::byte>& b, std::string name = "crafted.gguf") {
  return io::GgufFile::parse(io::MappedFile::borrow(b, std::move(name)));
}

// A fresh directory under the system temp dir, removed when the object dies.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = std::filesystem::temp_directory_path() /
           ("quanta_io_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
            (info ? info->name() : "x"));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::filesystem::path operator/(const std::string& s) const { return path / s; }
};

inline void write_file(const std::filesystem::path& p, const std::vector<std::byte>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
inline void write_text(const std::filesystem::path& p, std::string_view s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << s;
}

template <class T>
std::span<const std::byte> byte_span(const std::vector<T>& v) {
  return {reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(T)};
}

}  // namespace quanta::test
