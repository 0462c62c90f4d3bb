#include "output.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace quanta::bench {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string_view granularity_name(Granularity g) {
  switch (g) {
    case Granularity::group:
      return "group";
    case Granularity::channel:
      return "channel";
    case Granularity::tensor:
      return "tensor";
  }
  return "?";
}

// A number or "-" when missing, in a fixed width.
std::string num(double v, int width, int precision, char type = 'f') {
  if (!std::isfinite(v)) return fmt::format("{:>{}}", "-", width);
  if (type == 'e') return fmt::format("{:>{}.{}e}", v, width, precision);
  return fmt::format("{:>{}.{}f}", v, width, precision);
}

std::string status(const Row& r) {
  if (!r.check.error.empty()) return "ERROR";
  if (!r.error.empty()) return "ERROR";
  return r.check.pass ? "pass" : "FAIL";
}

}  // namespace

nlohmann::json header_json(const RunHeader& h) {
  nlohmann::json j;
  j["type"] = "header";
  j["device"] = h.location == Location::host ? "cpu" : "cuda";
  j["device_name"] = h.device;
  j["device_details"] = h.device_details;
  j["warning"] = h.warning;
  j["threads"] = h.threads;
  j["cache_bytes"] = h.cache_bytes;
  j["roof"] = {{"read_gbps", h.check_only ? kNaN : h.roof.read_gbps},
               {"compute_tflops", h.check_only ? kNaN : h.roof.compute_tflops},
               {"method", h.roof_method}};
  j["suite"] = h.suite;
  j["ms"] = h.ms;
  j["check_only"] = h.check_only;
  j["build_type"] = h.build_type;
  j["git_revision"] = h.git_revision;
  j["version"] = h.version;
  j["started"] = h.started;
  return j;
}

nlohmann::json row_json(const Row& r, const RunHeader& h) {
  const BenchSpec& s = r.plan.spec;
  const ProblemSize& p = r.plan.problem;
  const bool t = r.timed;
  nlohmann::json j;
  j["type"] = "row";
  j["op"] = op_name(s.op);
  j["layout"] = layout_name(s.layout);
  j["kernel"] = r.kernel;
  j["requested"] = s.kernel();
  j["format"] = s.format.name();
  j["scheme"] = s.format.info().name;
  j["bits"] = s.format.bits;
  j["group"] = s.format.group_size;
  j["granularity"] = granularity_name(s.format.granularity);
  j["bits_per_weight"] = s.format.bits_per_weight(s.dtype);
  j["dtype"] = dtype_name(s.dtype);
  j["device"] = s.device == Location::host ? "cpu" : "cuda";
  j["shape"] = r.plan.shape.label;
  j["shape_source"] = r.plan.shape.source;
  j["M"] = p.m;
  j["N"] = p.n;
  j["K"] = p.k;
  j["experts"] = p.experts;
  j["check_M"] = r.check.shape.m;
  j["check_N"] = r.check.shape.n;
  j["check_K"] = r.check.shape.k;
  j["check_experts"] = r.check.shape.experts;
  j["pass"] = r.pass();
  j["max_abs"] = r.check.max_abs;
  j["rel_l2"] = r.check.rel_l2;
  j["cosine"] = r.check.cosine;
  j["bound"] = r.check.bound;
  j["nonfinite"] = r.check.nonfinite;
  j["error"] = !r.check.error.empty() ? r.check.error : r.error;
  j["note"] = r.note;
  j["median_us"] = t ? r.timing.median * 1e6 : kNaN;
  j["min_us"] = t ? r.timing.min * 1e6 : kNaN;
  j["max_us"] = t ? r.timing.max * 1e6 : kNaN;
  j["runs"] = t ? r.timing.runs : 0;
  j["copies"] = t ? r.timing.copies : 0;
  j["bytes"] = t ? r.bytes : kNaN;
  j["flops"] = t ? r.flops : kNaN;
  j["gbps"] = t ? r.gbps : kNaN;
  j["tflops"] = t ? r.tflops : kNaN;
  j["roof_pct"] = t ? r.roof_pct : kNaN;
  j["roof_bound"] = t ? std::string(roof_bound(r.bytes, r.flops, h.roof)) : std::string();
  j["baseline"] = t ? r.baseline.name : "";
  j["baseline_us"] = t && r.baseline.timing.runs ? r.baseline.timing.median * 1e6 : kNaN;
  j["baseline_gbps"] =
      t && r.baseline.timing.runs ? gbps(r.baseline.bytes, r.baseline.timing.median) : kNaN;
  j["speedup"] = t ? r.speedup : kNaN;
  j["threads"] = h.threads;
  return j;
}

std::string header_text(const RunHeader& h) {
  std::string s = fmt::format("quanta bench: suite {}{} on {}\n", h.suite,
                              h.check_only ? " (check only)" : "", h.device);
  s += fmt::format("  device: {}\n", h.device_details);
  if (!h.check_only)
    s += fmt::format("  roof:   read {:.1f} GB/s, compute {:.3f} TFLOP/s ({})\n", h.roof.read_gbps,
                     h.roof.compute_tflops, h.roof_method);
  s += fmt::format("  build:  {} {} (git {}), started {}\n", h.version, h.build_type,
                   h.git_revision, h.started);
  if (!h.warning.empty()) s += fmt::format("  WARNING: {}\n", h.warning);
  return s;
}

std::string table_heading(bool check_only) {
  if (check_only)
    return fmt::format(
        "{:>9}  {:<14} {:<24} {:<15} {:<4} {:<2} {:>5} {:>5} {:>5}  {:>9} {:>9} {:>9}  {}", "row",
        "op", "kernel", "format", "dt", "ly", "M", "N", "K", "max_abs", "rel_l2", "bound", "check");
  return fmt::format(
      "{:>9}  {:<14} {:<24} {:<15} {:<4} {:>5} {:>6} {:>6}  {:<5} {:>8}  {:>10} {:>8} {:>8} "
      "{:>6}  {:>10} {:>7}",
      "row", "op", "kernel", "format", "dt", "M", "N", "K", "check", "rel_l2", "median_us", "GB/s",
      "TFLOP/s", "roof%", "base_us", "speedup");
}

std::string row_text(const Row& r, bool check_only, std::size_t index, std::size_t total) {
  const BenchSpec& s = r.plan.spec;
  const ProblemSize& p = r.plan.problem;
  const std::string pos = fmt::format("{}/{}", index, total);
  const std::string op =
      s.layout == Layout::kn ? fmt::format("{}.kn", op_name(s.op)) : std::string(op_name(s.op));
  std::string line;
  if (check_only) {
    line = fmt::format("{:>9}  {:<14} {:<24} {:<15} {:<4} {:<2} {:>5} {:>5} {:>5}  {} {} {}  {}",
                       pos, op, r.kernel, s.format.name(), dtype_name(s.dtype),
                       layout_name(s.layout), r.check.shape.m, r.check.shape.n, r.check.shape.k,
                       num(r.check.max_abs, 9, 2, 'e'), num(r.check.rel_l2, 9, 2, 'e'),
                       num(r.check.bound, 9, 0, 'e'), status(r));
  } else {
    line = fmt::format(
        "{:>9}  {:<14} {:<24} {:<15} {:<4} {:>5} {:>6} {:>6}  {:<5} {}  {} {} {} {}  {} {}", pos,
        op, r.kernel, s.format.name(), dtype_name(s.dtype), p.m, p.n, p.k, status(r),
        num(r.check.rel_l2, 8, 1, 'e'), num(r.timed ? r.timing.median * 1e6 : NAN, 10, 1),
        num(r.gbps, 8, 2), num(r.tflops, 8, 4), num(r.roof_pct, 6, 1),
        num(r.baseline.timing.runs ? r.baseline.timing.median * 1e6 : NAN, 10, 1),
        num(r.speedup, 7, 2));
  }
  const std::string err = !r.check.error.empty() ? r.check.error : r.error;
  if (!err.empty()) line += fmt::format("\n{:>11}{}", "", err);
  if (!r.note.empty()) line += fmt::format("\n{:>11}{}", "", r.note);
  return line;
}

}  // namespace quanta::bench
