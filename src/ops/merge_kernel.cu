// The merge op on the device: one warp a row (b, h, s), its lanes over d. The lse pair is read
// once per row; O_a and O_b are read only where their part contributes (kernels/lse_merge.h,
// the code the decode engine's split combine runs too).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "kernels/lse_merge.h"
#include "ops/merge_kernel.h"

namespace floe::detail::merge {
namespace {

constexpr int kThreads = 128;
constexpr int kRowsPerBlock = kThreads / 32;

__device__ __forceinline__ float load(const TensorArg& t, int64_t off) {
  switch (t.dtype) {
    case DType::f16:
      return __half2float(static_cast<const __half*>(t.ptr)[off]);
    case DType::bf16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(t.ptr)[off]);
    default:
      return static_cast<const float*>(t.ptr)[off];
  }
}

__device__ __forceinline__ void store(const TensorArg& t, int64_t off, float v) {
  switch (t.dtype) {
    case DType::f16:
      static_cast<__half*>(t.ptr)[off] = __float2half_rn(v);
      break;
    case DType::bf16:
      static_cast<__nv_bfloat16*>(t.ptr)[off] = __float2bfloat16_rn(v);
      break;
    default:
      static_cast<float*>(t.ptr)[off] = v;
  }
}

__device__ __forceinline__ int64_t row_off(const TensorArg& t, int64_t b, int64_t h, int64_t s) {
  return b * t.s[0] + h * t.s[1] + s * t.s[2];
}

__global__ void __launch_bounds__(kThreads) merge_kernel(const Params p) {
  const int lane = threadIdx.x & 31;
  const int64_t rows = p.b * p.h * p.s;
  const TensorArg &oa = p.t[0], &la = p.t[1], &ob = p.t[2], &lb = p.t[3], &o = p.t[4], &l = p.t[5];
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
       row < rows; row += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const int64_t s = row % p.s, h = row / p.s % p.h, b = row / p.s / p.h;
    const float lse_a = static_cast<const float*>(la.ptr)[row_off(la, b, h, s)];
    const float lse_b = static_cast<const float*>(lb.ptr)[row_off(lb, b, h, s)];
    kernels::LseMerge<float> m;
    m.see(lse_a);
    m.see(lse_b);
    const bool use_a = m.contributes(lse_a), use_b = m.contributes(lse_b);
    const float wa = use_a ? m.weight(lse_a) : 0.f, wb = use_b ? m.weight(lse_b) : 0.f;
    const float sum = wa + wb, factor = m.factor(sum);
    const int64_t a0 = row_off(oa, b, h, s), b0 = row_off(ob, b, h, s), o0 = row_off(o, b, h, s);
    for (int64_t d = lane; d < p.d; d += 32) {
      float acc = 0.f;
      if (use_a) acc = wa * load(oa, a0 + d * oa.s[3]);
      if (use_b) acc = fmaf(wb, load(ob, b0 + d * ob.s[3]), acc);
      store(o, o0 + d * o.s[3], acc * factor);
    }
    __syncwarp();  // every lane read lse before lane 0 overwrites it in place
    if (lane == 0) static_cast<float*>(l.ptr)[row_off(l, b, h, s)] = m.lse(sum);
    __syncwarp();
  }
}

}  // namespace

Status load_kernel() {
  cudaFuncAttributes attr;
  const cudaError_t err = cudaFuncGetAttributes(&attr, merge_kernel);
  if (err != cudaSuccess) {
    return Status(Code::device_error,
                  std::string("merge_kernel: cannot load: ") + cudaGetErrorString(err));
  }
  return Status();
}

Status launch(const Params& p, CUstream_st* stream) {
  const int64_t rows = p.b * p.h * p.s;
  if (rows == 0) return Status();
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  const auto grid =
      static_cast<unsigned>(blocks < (int64_t{1} << 30) ? blocks : (int64_t{1} << 30));
  merge_kernel<<<grid, kThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(p);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return Status(Code::device_error,
                  std::string("merge_kernel: launch failed: ") + cudaGetErrorString(err));
  }
  return Status();
}

}  // namespace floe::detail::merge
