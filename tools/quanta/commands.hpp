// Subcommands of the `quanta` tool; each registers itself on the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

namespace quanta::cli {

void add_formats_command(CLI::App& app);
void add_demo_command(CLI::App& app);

}  // namespace quanta::cli
