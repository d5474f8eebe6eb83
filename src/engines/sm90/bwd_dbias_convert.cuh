// sm90 backward, the bias kernel's last step where dBias is summed over a broadcast dim: one CTA
// per (query tile, key tile) of each of the summed dBias's batches and heads turns its fp32 tile
// of "dbias_accum" (the main kernel's reductions, in the consumers' S^T fragment order) into
// dBias, rounded to the element type. Thread t reads the float4s consumer thread t added, places
// each value at its (query, key) by the same partition of the S^T product into a row-major tile
// in shared memory, and the tile leaves 16 bytes a thread through dBias's strides (rows past s_q
// and keys past s_kv left out; s_kv is a multiple of 8, bwd_plan.cc). Tiles no CTA visited hold
// the preprocess's zeros.
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm90/bwd_params.h"
#include "engines/sm90/bwd_traits.cuh"

namespace floe::detail::sm90 {

template <class T>
__global__ void __launch_bounds__(T::kConsumerThreads)
    bwd_dbias_convert_kernel(const __grid_constant__ BwdParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace cute;
  using Element = typename T::Element;
  constexpr int kThreads = T::kConsumerThreads;
  constexpr int kRowElems = T::kBlockN + 8;  // padding: a warp's rows land on other banks
  __shared__ alignas(16) Element tile_s[T::kBlockM * kRowElems];

  const int tid = static_cast<int>(threadIdx.x);
  // blockIdx.x is the tile's index in the accumulator: ((b * dbias_h + h) * m + m_block) * n + n.
  int x = static_cast<int>(blockIdx.x);
  const int n_block = x % p.num_n_blocks;
  x /= p.num_n_blocks;
  const int m_block = x % p.num_m_blocks;
  x /= p.num_m_blocks;
  const int h = x % p.dbias_h, b = x / p.dbias_h;
  const int m0 = m_block * T::kBlockM, n0 = n_block * T::kBlockN;

  const float4* src = reinterpret_cast<const float4*>(
                          p.dbias_accum + static_cast<int64_t>(blockIdx.x) * p.dbias_tile_floats) +
                      tid;
  typename T::MmaSdP mma;
  Tensor c = mma.get_thread_slice(tid).partition_C(
      make_identity_tensor(cute::Shape<typename T::BN, typename T::BM>{}));  // (key, query)
  constexpr int kFrag = T::kBlockM * T::kBlockN / kThreads;
  static_assert(decltype(size(c))::value == kFrag, "S^T fragment size");
  CUTE_UNROLL
  for (int j = 0; j < kFrag / 4; ++j) {
    const float4 a = src[j * kThreads];
    const float in[4] = {a.x, a.y, a.z, a.w};
    CUTE_UNROLL
    for (int e = 0; e < 4; ++e) {
      tile_s[get<1>(c(4 * j + e)) * kRowElems + get<0>(c(4 * j + e))] = static_cast<Element>(in[e]);
    }
  }
  __syncthreads();

  Element* out = static_cast<Element*>(p.dbias) + b * p.dbias_strides.b + h * p.dbias_strides.h +
                 static_cast<int64_t>(m0) * p.dbias_strides.s + n0;
  const int rows = min(T::kBlockM, p.s_q - m0);
  const int pieces = min(T::kBlockN, p.s_kv - n0) / 8;  // whole: s_kv % 8 == 0
  constexpr int kPieces = T::kBlockN / 8;
  for (int i = tid; i < rows * kPieces; i += kThreads) {
    const int row = i / kPieces, piece = i % kPieces;
    if (piece >= pieces) continue;
    *reinterpret_cast<uint4*>(out + row * p.dbias_strides.s + piece * 8) =
        *reinterpret_cast<const uint4*>(tile_s + row * kRowElems + piece * 8);
  }
#endif
}

}  // namespace floe::detail::sm90
