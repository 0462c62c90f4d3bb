// libFuzzer target: the GGUF parser, every metadata value printed, every tensor's bytes read
// and the first row of every tensor quanta decodes dequantized.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "quanta/error.hpp"
#include "quanta/io.hpp"
#include "quanta/ops.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace quanta::io;
  const auto file =
      MappedFile::borrow({reinterpret_cast<const std::byte*>(data), size}, "fuzz.gguf");
  try {
    const GgufFile g = GgufFile::parse(file);
    std::size_t chars = 0;
    for (const auto& [key, value] : g.metadata()) chars += key.size() + value.summary().size();
    unsigned sum = 0;
    for (const GgufTensor& t : g.tensors()) {
      for (std::byte b : t.data) sum += static_cast<unsigned>(b);
      if (!t.type->scheme) continue;
      try {
        quanta::QuantizedMatrix row = g.matrix(t).expert(0);
        row.n = 1;
        std::vector<float> out(static_cast<std::size_t>(row.k));
        quanta::dequantize(row, quanta::MatrixView{out.data(), quanta::DType::f32, 1, row.k});
      } catch (const quanta::Error&) {
      }
    }
    return static_cast<int>((sum + chars) & 0);
  } catch (const quanta::Error&) {
    return 0;
  }
}
