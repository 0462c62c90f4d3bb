// Element types, read-only memory maps, tensor views and the helpers of common.hpp.
#include "io/common.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "quanta/io.hpp"

namespace quanta::io {

namespace {

struct ElemTypeRow {
  ElemType type;
  std::string_view name;
  std::size_t size;
};
// safetensors spellings and sizes (huggingface/safetensors `Dtype`; F8_E8M0 as MLX writes it).
constexpr std::array<ElemTypeRow, 16> kElemTypes{{
    {ElemType::boolean, "BOOL", 1},
    {ElemType::u8, "U8", 1},
    {ElemType::i8, "I8", 1},
    {ElemType::f8_e5m2, "F8_E5M2", 1},
    {ElemType::f8_e4m3, "F8_E4M3", 1},
    {ElemType::f8_e8m0, "F8_E8M0", 1},
    {ElemType::i16, "I16", 2},
    {ElemType::u16, "U16", 2},
    {ElemType::f16, "F16", 2},
    {ElemType::bf16, "BF16", 2},
    {ElemType::i32, "I32", 4},
    {ElemType::u32, "U32", 4},
    {ElemType::f32, "F32", 4},
    {ElemType::f64, "F64", 8},
    {ElemType::i64, "I64", 8},
    {ElemType::u64, "U64", 8},
}};

const ElemTypeRow& row_of(ElemType t) {
  for (const auto& r : kElemTypes)
    if (r.type == t) return r;
  throw Error(fmt::format("[quanta::io] element type id {} is not valid", static_cast<int>(t)));
}

}  // namespace

std::string_view elem_type_name(ElemType t) {
  return row_of(t).name;
}
std::size_t elem_type_size(ElemType t) {
  return row_of(t).size;
}

std::optional<ElemType> parse_elem_type(std::string_view name) {
  for (const auto& r : kElemTypes)
    if (r.name == name) return r.type;
  return std::nullopt;
}

std::optional<DType> to_dtype(ElemType t) {
  switch (t) {
    case ElemType::f32:
      return DType::f32;
    case ElemType::f16:
      return DType::f16;
    case ElemType::bf16:
      return DType::bf16;
    default:
      return std::nullopt;
  }
}

ElemType to_elem_type(DType t) {
  switch (t) {
    case DType::f32:
      return ElemType::f32;
    case DType::f16:
      return ElemType::f16;
    case DType::bf16:
      return ElemType::bf16;
  }
  return ElemType::f32;
}

// ---- MappedFile ------------------------------------------------------------------------------

std::shared_ptr<const MappedFile> MappedFile::open(const std::filesystem::path& path) {
  const std::string name = path.string();
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) detail::fail("io", name, fmt::format("cannot open: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    detail::fail("io", name, fmt::format("cannot stat: {}", std::strerror(e)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    detail::fail("io", name, "not a regular file");
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->name_ = name;
  f->size_ = static_cast<std::size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      detail::fail("io", name, fmt::format("cannot memory-map: {}", std::strerror(e)));
    }
    f->data_ = static_cast<const std::byte*>(p);
    f->mapped_ = true;
  }
  ::close(fd);  // the mapping keeps the file open
  return f;
}

std::shared_ptr<const MappedFile> MappedFile::borrow(std::span<const std::byte> bytes,
                                                     std::string name) {
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->data_ = bytes.data();
  f->size_ = bytes.size();
  f->name_ = std::move(name);
  return f;
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(const_cast<std::byte*>(data_), size_);
}

void MappedFile::release(std::span<const std::byte> range) const {
  if (!mapped_ || range.empty()) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  auto lo = reinterpret_cast<uintptr_t>(range.data());
  const auto hi = (lo + range.size()) & ~(page - 1);
  lo = (lo + page - 1) & ~(page - 1);  // whole pages inside the range only
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

// ---- TensorInfo ------------------------------------------------------------------------------

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // the reader checked the product fits
  return n;
}

bool TensorInfo::aligned() const {
  return reinterpret_cast<uintptr_t>(data.data()) % elem_type_size(type) == 0;
}

std::size_t TensorSpec::bytes() const {
  uint64_t n = elem_type_size(type);
  for (int64_t d : shape) {
    if (d < 0) throw Error(fmt::format("[quanta::io] tensor '{}': negative dim {}", name, d));
    if (!detail::mul_ok(n, static_cast<uint64_t>(d), n))
      throw Error(fmt::format("[quanta::io] tensor '{}': size overflows", name));
  }
  return static_cast<std::size_t>(n);
}

namespace detail {

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i < static_cast<std::size_t>(len)) return false;
    for (int k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<std::size_t>(len);
  }
  return true;
}

std::string printable(std::string_view s, std::size_t max) {
  std::string out;
  const bool utf8 = valid_utf8(s);
  for (std::size_t i = 0; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F || (c >= 0x80 && !utf8))
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  if (s.size() > max) out += "...";
  return out;
}

int resolve_threads(int threads) {
  if (threads > 0) return threads;
  const unsigned hc = std::thread::hardware_concurrency();
  return hc ? static_cast<int>(hc) : 1;
}

void parallel_for(int64_t n, int threads, const std::function<void(int64_t)>& fn) {
  const int t = static_cast<int>(std::min<int64_t>(resolve_threads(threads), n));
  if (t <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  std::atomic<bool> stop{false};
  std::exception_ptr first;
  std::mutex m;
  auto work = [&] {
    for (int64_t i; !stop && (i = next++) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard lock(m);
        if (!first) first = std::current_exception();
        stop = true;
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(t - 1));
  try {
    for (int i = 1; i < t; ++i) pool.emplace_back(work);
  } catch (...) {  // fewer threads than asked: the ones started (and this one) do the work
  }
  work();
  for (auto& th : pool) th.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace detail

}  // namespace quanta::io
