// A one-line progress bar with throughput and ETA, drawn on stderr with fmt when stderr is a
// terminal (no Debian package offers a C++ progress bar; this is the small one we need).
#pragma once

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "quanta/io.hpp"

namespace quanta::cli {

// "1.23 GB", "512 kB": decimal units, as disk sizes are sold.
inline std::string human_bytes(double b) {
  static constexpr const char* kUnits[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000.0 && u < 4) b /= 1000.0, ++u;
  return u == 0 ? fmt::format("{:.0f} {}", b, kUnits[u]) : fmt::format("{:.2f} {}", b, kUnits[u]);
}

inline std::string human_count(double n) {
  if (n >= 1e9) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.2f} M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.1f} k", n / 1e3);
  return fmt::format("{:.0f}", n);
}

class ProgressBar {
 public:
  ProgressBar(std::string label, bool enabled)
      : label_(std::move(label)), enabled_(enabled && ::isatty(STDERR_FILENO)) {}
  ~ProgressBar() { finish(); }

  void update(const io::QuantizeProgress& p) {
    if (!enabled_) return;
    const auto now = Clock::now();
    const bool done = p.tensors_done == p.tensors_total;
    if (!done && drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double frac = p.bytes_total ? static_cast<double>(p.bytes_done) / p.bytes_total : 1.0;
    const double rate = secs > 0 ? static_cast<double>(p.bytes_done) / secs : 0.0;
    const double eta = rate > 0 ? static_cast<double>(p.bytes_total - p.bytes_done) / rate : 0.0;
    constexpr int kWidth = 24;
    const int fill = std::clamp(static_cast<int>(frac * kWidth + 0.5), 0, kWidth);
    std::string line =
        fmt::format("{} [{}{}] {:3.0f}%  {}/{} tensors  {} / {}  {}/s  ETA {:.0f}s  ", label_,
                    std::string(static_cast<std::size_t>(fill), '#'),
                    std::string(static_cast<std::size_t>(kWidth - fill), '.'), frac * 100.0,
                    p.tensors_done, p.tensors_total, human_bytes(static_cast<double>(p.bytes_done)),
                    human_bytes(static_cast<double>(p.bytes_total)), human_bytes(rate), eta);
    line += p.current;
    const std::size_t cols = columns();
    if (line.size() >= cols) line.resize(cols - 1);
    fmt::print(stderr, "\r{}\x1b[K", line);
    std::fflush(stderr);
  }

  void finish() {
    if (enabled_ && drawn_) fmt::print(stderr, "\n");
    drawn_ = false;
  }

 private:
  using Clock = std::chrono::steady_clock;
  static std::size_t columns() {
    winsize w{};
    if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 20) return w.ws_col;
    return 100;
  }
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  Clock::time_point start_ = Clock::now(), last_{};
};

}  // namespace quanta::cli
