// Subcommands of the `quanta` tool. Each lives in its own file and registers itself:
//   static const CommandRegistration kRegistration{"demo", 20, add_demo_command};
// so adding a command never means editing main.cpp.
#pragma once

#include <CLI/CLI.hpp>

#include <string_view>
#include <vector>

namespace quanta::cli {

using CommandAdder = void (*)(CLI::App& app);

struct Command {
  std::string_view name;
  int order;  // position in `quanta --help`
  CommandAdder add;
};

inline std::vector<Command>& registered_commands() {
  static std::vector<Command> commands;
  return commands;
}

struct CommandRegistration {
  CommandRegistration(std::string_view name, int order, CommandAdder add) {
    registered_commands().push_back({name, order, add});
  }
};

}  // namespace quanta::cli
