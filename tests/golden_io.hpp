// Reading the committed golden files (tests/golden/*, made by scripts/golden/*).
#pragma once

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace quanta::test {

inline std::string golden_path(const std::string& rel) {
  return std::string(QUANTA_GOLDEN_DIR) + "/" + rel;
}

inline std::vector<unsigned char> read_bytes(const std::string& rel) {
  std::ifstream f(golden_path(rel), std::ios::binary);
  if (!f) throw std::runtime_error("cannot open golden file " + golden_path(rel));
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

template <class T>
std::vector<T> read_array(const std::string& rel) {
  const auto b = read_bytes(rel);
  if (b.size() % sizeof(T)) throw std::runtime_error("golden file size is not a multiple: " + rel);
  std::vector<T> v(b.size() / sizeof(T));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

inline nlohmann::json read_manifest(const std::string& folder) {
  std::ifstream f(golden_path(folder + "/MANIFEST.json"));
  if (!f) throw std::runtime_error("cannot open manifest in " + golden_path(folder));
  return nlohmann::json::parse(f);
}

}  // namespace quanta::test
