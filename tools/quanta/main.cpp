// The quanta command line: one subcommand per task, errors as one line and exit code 2.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>

#include "commands.hpp"
#include "quanta/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"quanta: quantized kernels for LLM inference (formats, kernels, bench)"};
  app.require_subcommand(1);
  auto commands = quanta::cli::registered_commands();
  std::sort(commands.begin(), commands.end(),
            [](const auto& a, const auto& b) { return a.order < b.order; });
  for (const auto& c : commands) c.add(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const quanta::Error& e) {
    fmt::print(stderr, "quanta: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "quanta: unexpected error: {}\n", e.what());
    return 2;
  }
  return 0;
}
