// What a run prints and writes: the header, a terminal table filled in as rows finish, and
// JSON lines (one header object, then one object per row) for report.py and other tools.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "runner.hpp"

namespace quanta::bench {

nlohmann::json header_json(const RunHeader& h);
// Every field of a row; NaN (a missing rate or baseline) is written as null.
nlohmann::json row_json(const Row& r, const RunHeader& h);

std::string header_text(const RunHeader& h);
std::string table_heading(bool check_only);
// One table line; `index` and `total` show progress.
std::string row_text(const Row& r, bool check_only, std::size_t index, std::size_t total);

}  // namespace quanta::bench
