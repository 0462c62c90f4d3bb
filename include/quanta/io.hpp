// Model files: safetensors (single or sharded, MLX's quantized layout), GGUF v2/v3, and the
// checkpoint-level jobs behind `quanta quantize` and `quanta check`.
//
// Every reader memory-maps its file read-only and hands out zero-copy views; every size and
// offset read from a file is checked against the file's size with overflow-checked
// arithmetic before it is used. A bad file raises quanta::Error whose message is one line
// naming the file and the problem, e.g.
//   [quanta::safetensors] model.safetensors: tensor 'lm_head.weight': data_offsets [0, 4096)
//   end past the data section (2048 bytes)
// Views stay valid while the object that produced them (or a copy of it) is alive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "quanta/dtype.hpp"
#include "quanta/format.hpp"
#include "quanta/matrix.hpp"

namespace quanta::io {

// ---- element types -------------------------------------------------------------------------

// Element types of tensors in files, in the safetensors spelling (GGUF's dense types map onto
// them). F8_E8M0 is what MLX and compressed-tensors write for E8M0 scales.
// clang-format off
enum class ElemType : uint8_t {
  boolean, u8, i8, f8_e5m2, f8_e4m3, f8_e8m0, i16, u16, f16, bf16, i32, u32, f32, f64, i64, u64
};
// clang-format on
std::string_view elem_type_name(ElemType t);  // "BF16"
std::size_t elem_type_size(ElemType t);       // bytes per element
std::optional<ElemType> parse_elem_type(std::string_view safetensors_name);
std::optional<DType> to_dtype(ElemType t);  // f32 / f16 / bf16, else nullopt
ElemType to_elem_type(DType t);

// ---- memory-mapped files ---------------------------------------------------------------------

class MappedFile {
 public:
  // Maps the whole file read-only (an empty file maps to no bytes).
  static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path);
  // Bytes the caller keeps alive (tests, fuzzers): no mapping, no copy.
  static std::shared_ptr<const MappedFile> borrow(std::span<const std::byte> bytes,
                                                  std::string name);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::string& name() const { return name_; }  // the path, for messages
  // Advises the kernel that these pages will not be read again soon (streaming jobs keep
  // their resident set near one tensor); the bytes stay readable.
  void release(std::span<const std::byte> range) const;

 private:
  MappedFile() = default;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  bool mapped_ = false;
  std::string name_;
};

// One tensor of a file: its bytes stay inside the mapped file (zero-copy).
struct TensorInfo {
  std::string name;
  ElemType type = ElemType::f32;
  std::vector<int64_t> shape;  // row-major, last axis contiguous
  std::span<const std::byte> data;
  std::string file;  // the file holding it, for messages

  int64_t numel() const;
  bool aligned() const;  // data aligned for typed loads of `type`
};

// ---- safetensors -----------------------------------------------------------------------------

class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::filesystem::path& path);
  // Parses bytes already mapped (or borrowed); the header rules are those of the reference
  // implementation (huggingface/safetensors `Metadata::validate`): header <= 100 MB of UTF-8
  // JSON; each tensor's dtype known, shape x dtype size == its byte range; ranges contiguous
  // from 0 and ending exactly at the end of the file.
  static SafetensorsFile parse(std::shared_ptr<const MappedFile> file);

  const std::string& name() const { return file_->name(); }
  std::span<const TensorInfo> tensors() const { return tensors_; }  // in file (offset) order
  const TensorInfo* find(std::string_view name) const;
  // `__metadata__` (string -> string), in file order.
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
  const std::shared_ptr<const MappedFile>& file() const { return file_; }

 private:
  std::shared_ptr<const MappedFile> file_;
  std::vector<TensorInfo> tensors_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

struct TensorSpec {
  std::string name;
  ElemType type = ElemType::f32;
  std::vector<int64_t> shape;
  std::size_t bytes() const;  // numel x element size, overflow-checked
};

// Streams a safetensors file: every tensor is declared up front (the header holds the
// offsets), then each tensor's bytes are written, in any order, by any thread. Tensors are
// laid out by decreasing element size, then name (the reference writer's order), so every
// tensor is aligned for typed loads. The file appears under its name only after finish()
// succeeds; until then it is `<path>.partial`, removed if the writer is destroyed unfinished.
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::filesystem::path path, std::vector<TensorSpec> tensors,
                    std::vector<std::pair<std::string, std::string>> metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // All of one tensor's bytes (size must equal the declared size). Thread-safe for distinct
  // tensors.
  void write(std::string_view name, std::span<const std::byte> bytes);
  void finish();  // checks every tensor was written, then renames into place
  std::size_t file_size() const { return file_size_; }

 private:
  struct Slot {
    TensorSpec spec;
    std::size_t offset = 0;  // from the start of the file
    bool written = false;
  };
  std::filesystem::path path_, partial_;
  std::vector<Slot> slots_;
  std::vector<std::size_t> by_name_;  // slot indices sorted by name
  std::size_t file_size_ = 0;
  int fd_ = -1;
  bool finished_ = false;
};

struct TensorData {
  TensorSpec spec;
  std::span<const std::byte> bytes;
};
void write_safetensors(const std::filesystem::path& path, std::span<const TensorData> tensors,
                       std::vector<std::pair<std::string, std::string>> metadata = {});

// ---- MLX checkpoints -------------------------------------------------------------------------

// config.json's "quantization" block as MLX / mlx-lm write it: {"group_size", "bits", "mode"}
// plus per-module overrides keyed by module path ({"group_size", "bits"[, "mode"]}, or false
// for a module left dense).
struct QuantizationConfig {
  Format base;
  std::vector<std::pair<std::string, std::optional<Format>>> overrides;
  // The format of module `module` ("model.layers.0.mlp.up_proj"): its override, else base.
  std::optional<Format> for_module(std::string_view module) const;
};
// nullopt when the config has no "quantization" block; throws naming `file` when it is bad.
std::optional<QuantizationConfig> parse_quantization_config(std::string_view config_json,
                                                            std::string_view file);

// A dense or MLX-quantized checkpoint: one .safetensors file, or a directory holding
// model.safetensors.index.json (sharded), model.safetensors, or model*.safetensors files;
// config.json beside it is read when present.
class Checkpoint {
 public:
  static Checkpoint open(const std::filesystem::path& path);
  // From files already parsed (tests, fuzzers); config_json may be empty.
  static Checkpoint from_files(std::vector<SafetensorsFile> files, std::string config_json,
                               std::string name);

  const std::string& name() const { return name_; }
  std::span<const TensorInfo> tensors() const { return tensors_; }  // sorted by name
  const TensorInfo* find(std::string_view name) const;
  std::span<const SafetensorsFile> files() const { return files_; }
  const std::string& config_json() const { return config_json_; }  // "" when absent
  const std::optional<QuantizationConfig>& quantization() const { return quantization_; }

 private:
  std::string name_;
  std::vector<SafetensorsFile> files_;
  std::vector<TensorInfo> tensors_;
  std::string config_json_;
  std::optional<QuantizationConfig> quantization_;
};

// One logical weight of a checkpoint: a dense tensor, or MLX's `<m>.weight` + `<m>.scales`
// [+ `<m>.biases`] mapped onto a QuantizedMatrix that views the file's bytes (copied only if
// a buffer is not aligned for its element type). Stacks ([E, N, K], MoE experts) have
// batch = E.
struct ModelTensor {
  std::string name;            // "<m>.weight" for quantized ones
  std::vector<int64_t> shape;  // logical (dense) shape
  const TensorInfo* dense = nullptr;
  std::optional<QuantizedMatrix> quantized;
  std::size_t stored_bytes = 0;  // on disk, scales and biases included

  int64_t numel() const;
  double bits_per_weight() const;
  std::string format_name() const;  // "affine-4b-g64", or the dtype ("BF16")
};
// `dense` points into ckpt.tensors(): keep that Checkpoint (not a copy of it) alive.
std::vector<ModelTensor> model_tensors(const Checkpoint& ckpt);

// ---- GGUF ------------------------------------------------------------------------------------

// clang-format off
enum class GgufType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8,
  array = 9, u64 = 10, i64 = 11, f64 = 12
};
// clang-format on
std::string_view gguf_type_name(GgufType t);

// A metadata value. Strings view the file's bytes; arrays of numbers keep their raw
// little-endian bytes (zero-copy), arrays of strings and of arrays hold their items.
struct GgufValue {
  GgufType type = GgufType::u8;
  uint64_t u = 0;                  // u8 .. u64, bool
  int64_t i = 0;                   // i8 .. i64
  double f = 0;                    // f32, f64
  std::string_view s;              // string
  GgufType elem = GgufType::u8;    // array: element type
  uint64_t count = 0;              // array: element count
  std::span<const std::byte> raw;  // array of numbers
  std::vector<GgufValue> items;    // array of strings or arrays

  GgufValue at(uint64_t index) const;                    // array element (throws out of range)
  std::optional<uint64_t> as_uint() const;               // any integer type that fits
  std::string summary(std::size_t max_items = 6) const;  // one line for `quanta inspect`
};

// Every ggml tensor type GGUF files use (ggml/include/ggml.h enum ggml_type), with its
// block geometry; `scheme` / `dense` name what quanta decodes it as (nullopt: listed, sized
// and reported by name, not decoded).
struct GgmlTypeInfo {
  uint32_t id;
  std::string_view name;
  int block_elems;
  int block_bytes;
  std::optional<Scheme> scheme;
  std::optional<ElemType> dense;
};
const GgmlTypeInfo* ggml_type_info(uint32_t id);  // nullptr for ids ggml does not define
std::span<const GgmlTypeInfo> ggml_types();

struct GgufTensor {
  std::string_view name;
  const GgmlTypeInfo* type = nullptr;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the row length (contiguous)
  uint64_t offset = 0;      // from the start of the data section
  std::span<const std::byte> data;
  int64_t numel() const;
};

class GgufFile {
 public:
  static GgufFile open(const std::filesystem::path& path);
  static GgufFile parse(std::shared_ptr<const MappedFile> file);

  const std::string& name() const { return file_->name(); }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  std::span<const std::pair<std::string_view, GgufValue>> metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;
  std::span<const GgufTensor> tensors() const { return tensors_; }  // in file order
  const GgufTensor* find_tensor(std::string_view name) const;
  // A quantized tensor as a zero-copy matrix: k = ne[0], n = ne[1], batch = ne[2] * ne[3].
  // Throws NotSupported naming the type for ggml types quanta does not decode.
  QuantizedMatrix matrix(const GgufTensor& t) const;
  const std::shared_ptr<const MappedFile>& file() const { return file_; }

 private:
  std::shared_ptr<const MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string_view, GgufValue>> metadata_;
  std::vector<GgufTensor> tensors_;
};

// Builds a GGUF file in memory (tests, fixtures, fuzz seeds).
class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3) : version_(version) {}
  void add_uint(std::string_view key, GgufType type, uint64_t v);  // u8..u64, bool
  void add_int(std::string_view key, GgufType type, int64_t v);    // i8..i64
  void add_float(std::string_view key, GgufType type, double v);   // f32, f64
  void add_string(std::string_view key, std::string_view v);
  // An array of numbers, `count` elements of `elem` already encoded little-endian.
  void add_array(std::string_view key, GgufType elem, uint64_t count,
                 std::span<const std::byte> encoded);
  void add_string_array(std::string_view key, std::span<const std::string> v);
  // A value whose encoding (type id first) the caller wrote: nested arrays, corrupt values.
  void add_encoded(std::string_view key, std::span<const std::byte> type_and_value);
  void set_alignment(uint32_t a);  // also written as general.alignment
  void add_tensor(std::string_view name, uint32_t ggml_type, std::vector<int64_t> ne,
                  std::span<const std::byte> data);
  std::vector<std::byte> bytes() const;
  void write(const std::filesystem::path& path) const;

 private:
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<int64_t> ne;
    std::vector<std::byte> data;
  };
  uint32_t version_;
  uint32_t alignment_ = 32;
  uint64_t kv_count_ = 0;
  std::vector<std::byte> kv_;
  std::vector<Tensor> tensors_;
};

// ---- checkpoint jobs (`quanta quantize`, `quanta check`) -------------------------------------

struct QuantizeCheckpointOptions {
  Format format = Format::affine(4, 64);
  // ECMAScript regex searched in each tensor name; matches stay dense.
  std::string skip;
  int threads = 0;                                     // 0 = all cores
  std::size_t max_shard_bytes = std::size_t{5} << 30;  // mlx-lm's MAX_FILE_SIZE_GB
  bool overwrite = false;                              // replace an existing checkpoint in OUT
};

struct QuantizeProgress {
  std::size_t tensors_done = 0, tensors_total = 0;
  uint64_t bytes_done = 0, bytes_total = 0;  // input bytes
  std::string_view current;                  // tensor being worked on
};

struct QuantizeSummary {
  std::size_t quantized = 0, kept = 0, shards = 0;
  uint64_t bytes_in = 0, bytes_out = 0;
  int64_t params = 0;
  double seconds = 0;
  std::size_t peak_buffer_bytes = 0;  // largest working buffer held at once
};

// Which tensors are quantized: mlx-lm's rule (mlx_lm/utils.py `quantize_model`, predicate
// `wrapped_predicate`: every module with `to_quantized`, i.e. nn.Linear, nn.Embedding and
// SwitchLinear, whose weight's last axis is a multiple of the group size; norms, biases and
// everything else stay dense). On tensor names: `*.weight` in F32/F16/BF16 with 2 axes, or 3
// axes under `switch_mlp.` / `experts.` (stacked experts); minus `skip` matches. Returns
// the reason a tensor stays dense, or nullopt if it is quantized.
std::optional<std::string> keep_dense_reason(const TensorInfo& t, const Format& f,
                                             std::string_view skip_regex = {});

// Reads a dense checkpoint tensor by tensor and writes an MLX-compatible quantized one
// (model.safetensors or model-0000i-of-0000n.safetensors + index, config.json with the
// "quantization" block, other files of the input directory copied).
QuantizeSummary quantize_checkpoint(
    const std::filesystem::path& in, const std::filesystem::path& out,
    const QuantizeCheckpointOptions& opts,
    const std::function<void(const QuantizeProgress&)>& progress = {});

struct TensorCheck {
  std::string name;
  std::string format;
  int64_t numel = 0;
  bool quantized = false;
  double rel_l2 = 0;   // ||w - ŵ|| / ||w||
  double max_abs = 0;  // max |w - ŵ|
  double snr_db = 0;   // 10 log10(Σw² / Σ(w - ŵ)²); +inf when exact
  int64_t nonfinite = 0;
};
struct CheckSummary {
  std::vector<TensorCheck> tensors;     // in name order
  std::vector<std::string> missing;     // dense tensors absent from the quantized checkpoint
  std::vector<std::string> unexpected;  // quantized-side tensors with no dense source
  double worst_rel_l2 = 0;
  double snr_db = 0;  // over all quantized weights together
  int64_t quantized_params = 0;
};
CheckSummary check_checkpoint(const std::filesystem::path& dense,
                              const std::filesystem::path& quantized, int threads = 0,
                              const std::function<void(const QuantizeProgress&)>& progress = {});

}  // namespace quanta::io
