// sm80 forward: the host side of one instantiation (shared-memory opt-in, launch) and the table
// of a tile's instantiations. Included only by the generated fwd_<tile>.cu files.
#pragma once

#include <cuda_runtime_api.h>

#include "engines/sm80/fwd_kernel.cuh"
#include "engines/sm80/fwd_kernels.h"
#include "engines/sm80/fwd_traits.cuh"

namespace floe::detail::sm80 {

template <class T, kernels::ScoreMod kMod, bool kServing>
struct FwdInstanceOf {
  static constexpr int kThreads = T::kThreads;
  static constexpr int kSmemBytes = FwdMainloop<T, kMod, kServing>::kSmemBytes;

  static cudaError_t prepare() {
    if (kSmemBytes <= 48 * 1024) return cudaSuccess;
    return cudaFuncSetAttribute(fwd_kernel<T, kMod, kServing>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  }

  static cudaError_t launch(const FwdParams& params, const unsigned& grid, cudaStream_t stream) {
    fwd_kernel<T, kMod, kServing><<<grid, T::kThreads, kSmemBytes, stream>>>(params);
    return cudaGetLastError();
  }
};

template <class T, kernels::ScoreMod kMod>
using FwdInstance = FwdInstanceOf<T, kMod, false>;
template <class T, kernels::ScoreMod kMod>
using FwdServingInstance = FwdInstanceOf<T, kMod, true>;

// The instantiations of a tile: {f16, bf16} x the score-mod kinds.
template <FwdTile kTile>
const FwdKernel* fwd_tile_kernel(DType dtype, kernels::ScoreMod mod) {
  static const TileKernels<FwdKernel> kernels(
      kFwdKernelBases[static_cast<int>(kTile)], InstanceTag<kernels::ScoreMod, FwdInstance>{},
      static_cast<FwdTraits<kTile, cute::half_t>*>(nullptr),
      static_cast<FwdTraits<kTile, cute::bfloat16_t>*>(nullptr));
  return kernels.get(dtype, mod);
}

// The same as serving instantiations (ragged sides, paged K/V), in their own translation unit
// (fwd_serving_<tile>.cu).
template <FwdTile kTile>
const FwdKernel* fwd_serving_tile_kernel(DType dtype, kernels::ScoreMod mod) {
  static const TileKernels<FwdKernel> kernels(
      kFwdServingKernelBases[static_cast<int>(kTile)],
      InstanceTag<kernels::ScoreMod, FwdServingInstance>{},
      static_cast<FwdTraits<kTile, cute::half_t>*>(nullptr),
      static_cast<FwdTraits<kTile, cute::bfloat16_t>*>(nullptr));
  return kernels.get(dtype, mod);
}

}  // namespace floe::detail::sm80
