// sm80 backward: the host side of one instantiation (shared-memory opt-in, the launches) and the
// table of a tile's four instantiations. Included only by the bwd_<tile>.cu files.
#pragma once

#include <cuda_runtime_api.h>

#include "engines/sm80/bwd_dbias.cuh"
#include "engines/sm80/bwd_dq_epilogue.cuh"
#include "engines/sm80/bwd_dsink.cuh"
#include "engines/sm80/bwd_kernel.cuh"
#include "engines/sm80/bwd_kernels.h"
#include "engines/sm80/bwd_preprocess.cuh"
#include "engines/sm80/bwd_traits.cuh"

namespace floe::detail::sm80 {

// The broadcast-dBias kernel uses the main kernel's Q, dO, K and V buffers (one stage).
template <class T>
constexpr int kDbiasSmemBytes = T::kOffV + T::kBlockN* T::kDv * 2;

template <class T, bool kScoreMod>
cudaError_t bwd_prepare() {
  cudaError_t err = cudaFuncSetAttribute(
      bwd_kernel<T, kScoreMod>, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes);
  if (err == cudaSuccess && kScoreMod) {
    err = cudaFuncSetAttribute(bwd_dbias_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               kDbiasSmemBytes<T>);
  }
  return err;
}

template <class T, bool kScoreMod>
cudaError_t bwd_launch(const BwdParams& params, const BwdGrids& grids, cudaStream_t stream) {
  bwd_preprocess_kernel<T><<<grids.query_tiles, 256, 0, stream>>>(params);
  if constexpr (kScoreMod) {  // a bias gradient implies a bias: the score-mod kernels
    if (params.dbias_sum != nullptr) {
      bwd_dbias_kernel<T><<<grids.bias_tiles, T::kThreads, kDbiasSmemBytes<T>, stream>>>(params);
    }
  }
  bwd_kernel<T, kScoreMod><<<grids.key_tiles, T::kThreads, T::kSmemBytes, stream>>>(params);
  bwd_dq_epilogue_kernel<T><<<grids.query_tiles, T::kThreads, 0, stream>>>(params);
  if (params.dsink != nullptr) bwd_dsink_kernel<T><<<grids.heads, 256, 0, stream>>>(params);
  return cudaGetLastError();
}

template <class T, bool kScoreMod>
constexpr BwdKernel bwd_entry(const char* name) {
  return BwdKernel{name, T::kThreads, T::kSmemBytes, &bwd_prepare<T, kScoreMod>,
                   &bwd_launch<T, kScoreMod>};
}

// The four instantiations of a tile: {f16, bf16} x {plain, score-mod}.
template <HeadDimTile kTile>
struct BwdTileKernels {
  using F16 = BwdTraits<kTile, cute::half_t>;
  using BF16 = BwdTraits<kTile, cute::bfloat16_t>;

  static const BwdKernel* get(DType dtype, bool score_mod) {
    const auto& names = kKernelNames[1][static_cast<int>(kTile)];
    static const BwdKernel table[4] = {
        bwd_entry<F16, false>(names[0]), bwd_entry<F16, true>(names[1]),
        bwd_entry<BF16, false>(names[2]), bwd_entry<BF16, true>(names[3])};
    if (dtype != DType::f16 && dtype != DType::bf16) return nullptr;
    return &table[(dtype == DType::bf16 ? 2 : 0) + (score_mod ? 1 : 0)];
  }
};

}  // namespace floe::detail::sm80
