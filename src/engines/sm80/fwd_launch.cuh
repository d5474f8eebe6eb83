// sm80 forward: the host side of one instantiation (shared-memory opt-in, launch) and the table
// of a tile's four instantiations. Included only by the generated fwd_<tile>.cu files.
#pragma once

#include <cuda_runtime_api.h>

#include "engines/sm80/fwd_kernel.cuh"
#include "engines/sm80/fwd_kernels.h"
#include "engines/sm80/fwd_traits.cuh"

namespace floe::detail::sm80 {

template <class T, bool kScoreMod, bool kServing>
struct FwdInstanceOf {
  static cudaError_t prepare() {
    if (T::kSmemBytes <= 48 * 1024) return cudaSuccess;
    return cudaFuncSetAttribute(fwd_kernel<T, kScoreMod, kServing>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes);
  }

  static cudaError_t launch(const FwdParams& params, const unsigned& grid, cudaStream_t stream) {
    fwd_kernel<T, kScoreMod, kServing><<<grid, T::kThreads, T::kSmemBytes, stream>>>(params);
    return cudaGetLastError();
  }
};

template <class T, bool kScoreMod>
using FwdInstance = FwdInstanceOf<T, kScoreMod, false>;
template <class T, bool kScoreMod>
using FwdServingInstance = FwdInstanceOf<T, kScoreMod, true>;

// The four instantiations of a tile: {f16, bf16} x {plain, score-mod}.
template <FwdTile kTile>
const FwdKernel* fwd_tile_kernel(DType dtype, bool score_mod) {
  static const TileKernels<FwdKernel> kernels =
      make_tile_kernels<FwdKernel, FwdInstance, FwdTraits<kTile, cute::half_t>,
                        FwdTraits<kTile, cute::bfloat16_t>>(
          kFwdKernelNames[static_cast<int>(kTile)]);
  return kernels.get(dtype, score_mod);
}

// The same four as serving instantiations (ragged sides, paged K/V), in their own translation
// unit (fwd_serving_<tile>.cu).
template <FwdTile kTile>
const FwdKernel* fwd_serving_tile_kernel(DType dtype, bool score_mod) {
  static const TileKernels<FwdKernel> kernels =
      make_tile_kernels<FwdKernel, FwdServingInstance, FwdTraits<kTile, cute::half_t>,
                        FwdTraits<kTile, cute::bfloat16_t>>(
          kFwdServingKernelNames[static_cast<int>(kTile)]);
  return kernels.get(dtype, score_mod);
}

}  // namespace floe::detail::sm80
