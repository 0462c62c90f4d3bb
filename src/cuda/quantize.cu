// Device quantize, bit-exact with the host quantizer (src/format/quantize.cpp): the same shared
// codecs (affine_params_mlx / affine_encode_mlx, mx_scale_mlx, nv_scale_mlx, fp4/fp8 encoders)
// with the same f32 operations in the same order, one thread per group of one row.
//   affine       min / max of the group -> (scale, bias) in f32 -> codes with the f32 params,
//                packed LSB-first; scale and bias stored in w's dtype (RNE).
//   microscaled  max |w| -> E8M0 / E4M3 scale byte -> E2M1 / E4M3 codes.
// Other formats and the [K, N] layout go through the host quantizer (download, quantize,
// upload): correct, and stated in docs/perf-cuda.md.
#include <cstring>
#include <memory>
#include <vector>

#include "core/validate.hpp"
#include "cuda/backend.hpp"
#include "cuda/checks.hpp"
#include "cuda/common.cuh"
#include "cuda/runtime.cuh"
#include "format/affine.hpp"
#include "format/microscaled.hpp"

namespace quanta::cuda {

namespace {

constexpr int kThreads = 128;

// The storage type the host quantizer instantiates for dtype T (quanta's f16 / bf16 structs).
template <class T>
struct HostType {
  using type = float;
};
template <>
struct HostType<__half> {
  using type = quanta::f16;
};
template <>
struct HostType<__nv_bfloat16> {
  using type = quanta::bf16;
};

struct QuantArgs {
  const void* w;  // [N][K] of T
  uint8_t* codes;
  uint8_t* scales;
  uint8_t* biases;
  int64_t groups_total, groups_per_row, k;
  int32_t group, bits;
  Scheme scheme;
  DType dtype;
};

// Writes `bits`-bit codes LSB-first (codec::affine_put_code's stream) one byte at a time.
struct BitWriter {
  uint8_t* out;
  uint32_t acc = 0;
  int fill = 0;
  __device__ void put(uint32_t q, int bits) {
    acc |= q << fill;
    fill += bits;
    while (fill >= 8) {
      *out++ = static_cast<uint8_t>(acc & 0xffu);
      acc >>= 8;
      fill -= 8;
    }
  }
};

template <class T>
__global__ void __launch_bounds__(kThreads) quantize_affine_kernel(const QuantArgs a) {
  const int64_t gid = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (gid >= a.groups_total) return;
  const int64_t row = gid / a.groups_per_row, g = gid % a.groups_per_row;
  const T* src = static_cast<const T*>(a.w) + row * a.k + g * a.group;
  float lo = INFINITY, hi = -INFINITY;
  for (int i = 0; i < a.group; ++i) {  // std::max / std::min over the f32 values, as the host
    const float v = to_f32(src[i]);
    hi = hi < v ? v : hi;
    lo = v < lo ? v : lo;
  }
  const codec::AffineParams par = codec::affine_params_mlx(lo, hi, a.bits);
  BitWriter bw{a.codes + (row * a.k + g * a.group) * a.bits / 8};
  for (int i = 0; i < a.group; ++i)
    bw.put(codec::affine_encode_mlx(to_f32(src[i]), par, a.bits), a.bits);
  store_f32_as(a.scales, a.dtype, gid, par.scale);
  store_f32_as(a.biases, a.dtype, gid, par.bias);
}

template <class T>
__global__ void __launch_bounds__(kThreads) quantize_micro_kernel(const QuantArgs a) {
  using H = typename HostType<T>::type;
  const int64_t gid = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (gid >= a.groups_total) return;
  const int64_t row = gid / a.groups_per_row, g = gid % a.groups_per_row;
  const T* src = static_cast<const T*>(a.w) + row * a.k + g * a.group;
  float amax = 0.0f;
  for (int i = 0; i < a.group; ++i) amax = fmaxf(amax, fabsf(to_f32(src[i])));
  codec::MicroScale s{};
  switch (a.scheme) {
    case Scheme::mxfp4:
      s = codec::mx_scale_mlx<H>(amax, codec::kE2M1Max);
      break;
    case Scheme::mxfp8:
      s = codec::mx_scale_mlx<H>(amax, codec::kE4M3Max);
      break;
    default:
      s = codec::nv_scale_mlx<H>(amax, 1.0f);
      break;
  }
  a.scales[gid] = s.byte;
  BitWriter bw{a.codes + (row * a.k + g * a.group) * a.bits / 8};
  for (int i = 0; i < a.group; ++i) {
    const float v = to_f32(src[i]);
    const uint32_t q = a.scheme == Scheme::mxfp8 ? codec::fp8_encode_mlx<H>(v, s.divisor)
                                                 : codec::fp4_encode_mlx<H>(v, s.divisor, 1.0f);
    bw.put(q, a.bits);
  }
}

// The host quantizer on a downloaded copy, uploaded again.
QuantizedMatrix via_host(ConstMatrixView w, const Format& f, const QuantizeOptions& o,
                         const Context& ctx) {
  std::vector<unsigned char> host(w.bytes());
  QUANTA_CUDA_CHECK(
      cudaMemcpyAsync(host.data(), w.data, host.size(), cudaMemcpyDeviceToHost, stream_of(ctx)));
  QUANTA_CUDA_CHECK(cudaStreamSynchronize(stream_of(ctx)));
  Context hc = ctx;
  hc.cuda_stream = nullptr;
  const QuantizedMatrix q =
      quanta::quantize(ConstMatrixView{host.data(), w.dtype, w.rows, w.cols}, f, o, hc);
  return cuda::to_device(q, ctx);
}

}  // namespace

QuantizedMatrix quantize(ConstMatrixView w, const Format& f, const QuantizeOptions& o,
                         const Context& ctx) {
  constexpr std::string_view kOp = "quantize";
  quanta::detail::check_view(w, kOp, "w");
  require_device_pointer(w.data, kOp, "w");
  const Family fam = f.info().family;
  const bool kernel = (fam == Family::affine || fam == Family::microscaled) &&
                      o.layout == Layout::nk && !o.nvfp4_tensor_amax;
  if (!kernel) return via_host(w, f, o, ctx);
  validate_format(f, kOp, "format");
  const int64_t n = w.rows, k = w.cols;
  const Footprint fp = footprint(f, n, k, Layout::nk, w.dtype, kOp);
  auto buf = std::make_shared<DeviceBuffer>(fp.total() ? fp.total() : 1);
  QuantizedMatrix m;
  m.format = f;
  m.layout = Layout::nk;
  m.scale_dtype = w.dtype;
  m.location = Location::device;
  m.n = n;
  m.k = k;
  m.codes = buf->as<std::byte>();
  m.scales = fp.scale_bytes ? m.codes + fp.code_bytes : nullptr;
  m.biases = fp.bias_bytes ? m.codes + fp.code_bytes + fp.scale_bytes : nullptr;
  m.keepalive = buf;

  QuantArgs a{};
  a.w = w.data;
  a.codes = reinterpret_cast<uint8_t*>(m.codes);
  a.scales = reinterpret_cast<uint8_t*>(m.scales);
  a.biases = reinterpret_cast<uint8_t*>(m.biases);
  a.group = f.group_size;
  a.bits = f.bits;
  a.k = k;
  a.groups_per_row = k / f.group_size;
  a.groups_total = n * a.groups_per_row;
  a.scheme = f.scheme;
  a.dtype = w.dtype;
  const unsigned grid = static_cast<unsigned>((a.groups_total + kThreads - 1) / kThreads);
  dispatch_dtype(w.dtype, [&]<class T>() {
    if (fam == Family::affine)
      quantize_affine_kernel<T><<<grid, kThreads, 0, stream_of(ctx)>>>(a);
    else
      quantize_micro_kernel<T><<<grid, kThreads, 0, stream_of(ctx)>>>(a);
    QUANTA_CUDA_CHECK_LAUNCH();
  });
  return m;
}

}  // namespace quanta::cuda
