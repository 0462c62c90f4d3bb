// `quanta formats`: every scheme from the format table.
#include <fmt/format.h>

#include <memory>

#include "commands.hpp"
#include "quanta/format.hpp"

namespace quanta::cli {

namespace {

std::string list(std::span<const int> v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

namespace {
void add_formats_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("formats", "List every storage format quanta reads and writes");
  auto markdown = std::make_shared<bool>(false);
  cmd->add_flag("--markdown", *markdown, "Print the markdown table of docs/FORMATS.md");
  cmd->callback([markdown] {
    if (*markdown) {
      fmt::print("{}", formats_markdown_table());
      return;
    }
    fmt::print("{:<8} {:<12} {:<10} {:<18} {:>8} {:>6} {:<6} {}\n", "scheme", "bits", "groups",
               "scales", "bits/w", "encode", "[K,N]", "bit-exact with");
    for (const SchemeInfo& i : kSchemes) {
      const Format f{i.scheme, i.bits[i.bits.size() > 2 ? 2 : 0],
                     i.groups[i.groups.size() > 1 ? 1 : 0],
                     i.family == Family::fp8 ? Granularity::channel : Granularity::group};
      fmt::print("{:<8} {:<12} {:<10} {:<18} {:>8.3f} {:>6} {:<6} {}\n", i.name, list(i.bits),
                 list(i.groups), scale_encoding_name(i.scale), f.bits_per_weight(DType::f16),
                 i.encode ? "yes" : "no", i.kn_layout ? "yes" : "no", i.owner_ref);
    }
  });
}

const CommandRegistration kRegistration{"formats", 90, add_formats_command};
}  // namespace

}  // namespace quanta::cli
