// sm80 backward: the host side of one instantiation (shared-memory opt-in, the launches) and the
// table of a tile's instantiations. Included only by the generated bwd_<tile>.cu files.
#pragma once

#include <cuda_runtime_api.h>

#include "engines/sm80/bwd_dq_epilogue.cuh"
#include "engines/sm80/bwd_dsink.cuh"
#include "engines/sm80/bwd_kernel.cuh"
#include "engines/sm80/bwd_kernels.h"
#include "engines/sm80/bwd_preprocess.cuh"
#include "engines/sm80/bwd_traits.cuh"

namespace floe::detail::sm80 {

template <class T, kernels::ScoreMod kMod, bool kServing>
struct BwdInstanceOf {
  static constexpr int kThreads = T::kThreads;
  static constexpr int kSmemBytes = T::kSmemBytes;

  static cudaError_t prepare() {
    return cudaFuncSetAttribute(bwd_kernel<T, kMod, kServing>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes);
  }

  static cudaError_t launch(const BwdParams& params, const BwdGrids& grids, cudaStream_t stream) {
    bwd_preprocess_kernel<T, kServing><<<grids.query_tiles, 256, 0, stream>>>(params);
    bwd_kernel<T, kMod, kServing><<<grids.key_tiles, T::kThreads, T::kSmemBytes, stream>>>(params);
    bwd_dq_epilogue_kernel<T, kServing><<<grids.query_tiles, T::kThreads, 0, stream>>>(params);
    if (params.dsink != nullptr) bwd_dsink_kernel<T><<<grids.heads, 256, 0, stream>>>(params);
    return cudaGetLastError();
  }
};

template <class T, kernels::ScoreMod kMod>
using BwdInstance = BwdInstanceOf<T, kMod, false>;
template <class T, kernels::ScoreMod kMod>
using BwdServingInstance = BwdInstanceOf<T, kMod, true>;

// The instantiations of a tile: {f16, bf16} x the score-mod kinds.
template <BwdTile kTile>
const BwdKernel* bwd_tile_kernel(DType dtype, kernels::ScoreMod mod) {
  static const TileKernels<BwdKernel> kernels(
      kBwdKernelBases[static_cast<int>(kTile)], InstanceTag<kernels::ScoreMod, BwdInstance>{},
      static_cast<BwdTraits<kTile, cute::half_t>*>(nullptr),
      static_cast<BwdTraits<kTile, cute::bfloat16_t>*>(nullptr));
  return kernels.get(dtype, mod);
}

// The same as serving instantiations (ragged sides), in their own translation unit
// (bwd_serving_<tile>.cu).
template <BwdTile kTile>
const BwdKernel* bwd_serving_tile_kernel(DType dtype, kernels::ScoreMod mod) {
  static const TileKernels<BwdKernel> kernels(
      kBwdServingKernelBases[static_cast<int>(kTile)],
      InstanceTag<kernels::ScoreMod, BwdServingInstance>{},
      static_cast<BwdTraits<kTile, cute::half_t>*>(nullptr),
      static_cast<BwdTraits<kTile, cute::bfloat16_t>*>(nullptr));
  return kernels.get(dtype, mod);
}

}  // namespace floe::detail::sm80
