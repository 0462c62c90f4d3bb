// libFuzzer target: the safetensors parser, then MLX's quantized layout on top of whatever it
// accepted (three quantization configs), decoding the first row of every quantized weight so
// AddressSanitizer sees every byte range the reader vouched for.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "quanta/error.hpp"
#include "quanta/io.hpp"
#include "quanta/ops.hpp"

namespace {

constexpr const char* kConfigs[] = {
    R"({"quantization":{"group_size":64,"bits":4}})",
    R"({"quantization":{"group_size":32,"bits":3,"mode":"affine","a":{"mode":"mxfp4"},
        "b":{"mode":"nvfp4"},"c":false}})",
    R"({"quantization":{"mode":"mxfp8"}})",
};

void first_rows(const quanta::QuantizedMatrix& q) {
  quanta::QuantizedMatrix row = q.expert(q.batch - 1);
  row.n = 1;
  std::vector<float> out(static_cast<std::size_t>(row.k));
  quanta::dequantize(row, quanta::MatrixView{out.data(), quanta::DType::f32, 1, row.k});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace quanta::io;
  const auto file =
      MappedFile::borrow({reinterpret_cast<const std::byte*>(data), size}, "fuzz.safetensors");
  try {
    const SafetensorsFile f = SafetensorsFile::parse(file);
    unsigned sum = 0;
    for (const TensorInfo& t : f.tensors()) {
      for (std::byte b : t.data) sum += static_cast<unsigned>(b);
      sum += static_cast<unsigned>(t.numel());
    }
    for (const char* config : kConfigs) {
      try {
        const Checkpoint c = Checkpoint::from_files({f}, config, "fuzz");
        for (const ModelTensor& m : model_tensors(c))
          if (m.quantized) first_rows(*m.quantized);
      } catch (const quanta::Error&) {
      }
    }
    return static_cast<int>(sum & 0);
  } catch (const quanta::Error&) {
    return 0;
  }
}
