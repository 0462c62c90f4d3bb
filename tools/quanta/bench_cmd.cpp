// `quanta bench`: every registered kernel checked against the fp64 oracle and timed against
// the measured roof and a dense baseline, in one run (the runner lives in bench/).
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "build_info.hpp"
#include "commands.hpp"
#include "device.hpp"
#include "output.hpp"
#include "quanta/error.hpp"
#include "runner.hpp"
#include "suites.hpp"

namespace quanta::cli {

namespace {

struct BenchOptions {
  std::string device;  // "" = CUDA when present, else CPU
  std::string suite = "quick";
  std::string filter;
  std::string ms;
  std::string dtypes;
  std::string json;
  std::string report;
  bool check_only = false;
  bool explain = false;
  std::string kernels;  // "" = the suite's choice
  int threads = 0;
  int runs = 20;
  double min_time = 0.1;
  double max_row_time = 300;
};

// The command line that reproduces this run (for the report).
std::string command_line(const BenchOptions& o, std::string_view device) {
  std::string c = fmt::format("quanta bench --device {} --suite {}", device, o.suite);
  if (!o.filter.empty()) c += fmt::format(" --filter '{}'", o.filter);
  if (!o.ms.empty()) c += " --m " + o.ms;
  if (!o.dtypes.empty()) c += " --dtype " + o.dtypes;
  if (!o.kernels.empty()) c += " --kernels " + o.kernels;
  if (o.threads) c += fmt::format(" --threads {}", o.threads);
  if (o.runs != 20) c += fmt::format(" --runs {}", o.runs);
  if (!o.json.empty()) c += " --json " + o.json;
  if (!o.report.empty()) c += " --report " + o.report;
  return c;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

void run_bench(const BenchOptions& o) {
  bench::RunOptions ro;
  ro.suite = o.suite;
  if (!o.ms.empty()) ro.ms = bench::parse_m_list(o.ms);
  if (!o.dtypes.empty()) ro.dtypes = bench::parse_dtype_list(o.dtypes);
  ro.filter = o.filter;
  ro.check_only = o.check_only;
  if (!o.kernels.empty()) ro.automatic = o.kernels == "auto";
  ro.timing.min_runs = o.runs;
  ro.timing.min_seconds = o.min_time;
  ro.timing.max_row_seconds = o.max_row_time;

  std::unique_ptr<bench::Device> device = bench::make_device(o.device, o.threads);
  bench::Runner runner(*device, ro);
  std::vector<std::pair<bench::RowPlan, std::string>> skipped;
  const std::vector<bench::RowPlan> rows = runner.plan(&skipped);
  if (rows.empty())
    throw Error(fmt::format(
        "[quanta::bench] no rows: the suite '{}'{} selects nothing on {}", o.suite,
        o.filter.empty() ? "" : fmt::format(" with --filter '{}'", o.filter), device->name()));

  std::string json_path = o.json;
  if (json_path.empty() && !o.report.empty()) {
    std::filesystem::create_directories(o.report);
    json_path = (std::filesystem::path(o.report) / "bench.jsonl").string();
  }
  std::ofstream json;
  if (!json_path.empty()) {
    json.open(json_path);
    if (!json) throw Error(fmt::format("[quanta::bench] --json: cannot write '{}'", json_path));
  }

  const bench::RunHeader& header = runner.start();
  fmt::print("{}", bench::header_text(header));
  if (o.device.empty() && device->location() == Location::host && cuda_available())
    fmt::print(
        "  note:   a GPU is present but this build has no CUDA bench support "
        "(bench/cuda/gpu_timing.hpp); benching the CPU\n");
  fmt::print("  rows:   {} planned{}\n\n", rows.size(),
             skipped.empty() ? ""
                             : fmt::format(", {} declined by their kernel{}", skipped.size(),
                                           o.explain ? "" : " (--explain lists why)"));
  if (json) json << bench::header_json(header).dump() << '\n';
  if (o.explain)
    for (const auto& [p, why] : skipped) fmt::print("  skip {}: {}\n", p.key(), why);
  fmt::print("{}\n", bench::table_heading(o.check_only));
  std::fflush(stdout);

  std::size_t failed = 0, index = 0;
  std::vector<std::string> failures;
  for (const bench::RowPlan& p : rows) {
    ++index;
    if (o.explain) {
      const Problem q = bench::to_problem(p.spec, p.problem);
      fmt::print("  selector for {}:\n", p.key());
      const std::string e = explain(q);
      std::size_t pos = 0;
      while (pos < e.size()) {
        const std::size_t nl = e.find('\n', pos);
        fmt::print("    {}\n", e.substr(pos, nl - pos));
        pos = nl == std::string::npos ? e.size() : nl + 1;
      }
    }
    const bench::Row r = runner.run(p);
    fmt::print("{}\n", bench::row_text(r, o.check_only, index, rows.size()));
    std::fflush(stdout);
    if (json) json << bench::row_json(r, header).dump() << '\n' << std::flush;
    if (!r.pass()) {
      ++failed;
      failures.push_back(p.key());
    }
  }
  json.close();
  fmt::print("\n{} of {} rows passed their check against the fp64 oracle{}\n", rows.size() - failed,
             rows.size(), json_path.empty() ? "" : fmt::format("; rows in {}", json_path));

  if (!o.report.empty()) {
    const char* env = std::getenv("QUANTA_BENCH_REPORT");
    const std::string script = env ? env : QUANTA_BENCH_REPORT_SCRIPT;
    const std::string cmd = fmt::format(
        "python3 {} {} {} --command {}", shell_quote(script), shell_quote(json_path),
        shell_quote(o.report),
        shell_quote(command_line(o, device->location() == Location::host ? "cpu" : "cuda")));
    std::fflush(stdout);
    if (std::system(cmd.c_str()) != 0)
      throw Error(fmt::format("[quanta::bench] --report: '{}' failed", cmd));
  }
  if (failed) {
    std::string list;
    for (std::size_t i = 0; i < failures.size() && i < 10; ++i) list += "\n  " + failures[i];
    if (failures.size() > 10) list += fmt::format("\n  ... and {} more", failures.size() - 10);
    throw Error(fmt::format("[quanta::bench] {} row(s) failed their check:{}", failed, list));
  }
}

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand(
      "bench",
      "Check every kernel against the fp64 oracle and time it against the roof and a baseline");
  cmd->add_option("--device", o->device, "cpu or cuda (default: cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--suite", o->suite, "quick, seeds, models or full")
      ->check(CLI::IsMember({"quick", "seeds", "models", "full"}));
  cmd->add_option("--filter", o->filter,
                  "regex on the row key op/layout/kernel/format/dtype@shape M=m");
  cmd->add_option("--m", o->ms, "comma-separated M values (default: the suite's)");
  cmd->add_option("--dtype", o->dtypes, "comma-separated activation dtypes (default: the suite's)");
  cmd->add_flag("--check-only", o->check_only,
                "check every registered kernel on its check problems; nothing is timed");
  cmd->add_option("--kernels", o->kernels,
                  "each: a row per kernel table entry; auto: the selector's pick (default: "
                  "auto for quick, each for the other suites and --check-only)")
      ->check(CLI::IsMember({"each", "auto"}));
  cmd->add_option("--json", o->json, "write one JSON object per row (after a header object)");
  cmd->add_option("--report", o->report, "write a markdown report and PNG plots to this folder");
  cmd->add_flag("--explain", o->explain, "print the selector's verdict on every kernel per row");
  cmd->add_option("--threads", o->threads, "CPU threads (default: all hardware threads)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--runs", o->runs, "minimum timed runs per row")->check(CLI::Range(20, 100000));
  cmd->add_option("--min-time", o->min_time, "minimum timed seconds per row")
      ->check(CLI::Range(0.0, 60.0));
  cmd->add_option("--max-row-time", o->max_row_time,
                  "skip timing a row whose runs would take longer than this many seconds "
                  "(0: no limit; CPU only)")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->callback([o] { run_bench(*o); });
}

const CommandRegistration kRegistration{"bench", 30, add_bench_command};

}  // namespace

}  // namespace quanta::cli
