// sm90 forward: the host side of one instantiation (shared-memory opt-in, launch) and the table
// of a tile's instantiations. Included only by the fwd_<tile>.cu files.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "engines/sm90/fwd_kernel.cuh"
#include "engines/sm90/fwd_kernels.h"
#include "engines/sm90/fwd_traits.cuh"

namespace floe::detail::sm90 {

template <class T>
struct FwdInstanceOf {
  static constexpr int kThreads = T::kThreads;
  static constexpr int kSmemBytes = T::kSmemBytes;

  static cudaError_t prepare() {
    return cudaFuncSetAttribute(fwd_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                T::kSmemBytes);
  }

  static cudaError_t launch(const FwdParams& params, const unsigned& grid, cudaStream_t stream) {
    fwd_kernel<T><<<grid, T::kThreads, T::kSmemBytes, stream>>>(params);
    return cudaGetLastError();
  }
};

template <FwdTile kTile>
struct FwdTileInstances {
  // The planner takes the tile's rows from fwd_tiles.h (its TMA boxes).
  static_assert(FwdTraits<kTile, cute::half_t>::kBlockM == fwd_tile_shape(kTile).block_m);
  template <class Element, FwdVariant kVariant>
  using Instance = FwdInstanceOf<FwdTraits<kTile, Element, kVariant == FwdVariant::score_mod>>;
};

// The instantiations of a tile: {f16, bf16} x {plain, score-mod}.
template <FwdTile kTile>
const FwdKernel* fwd_tile_kernel(DType dtype, FwdVariant variant) {
  static const TileKernels<FwdKernel, FwdVariants> kernels(
      std::string("sm90_fwd_") + fwd_tile_shape(kTile).name,
      InstanceTag<FwdVariant, FwdTileInstances<kTile>::template Instance>{},
      static_cast<cute::half_t*>(nullptr), static_cast<cute::bfloat16_t*>(nullptr));
  return kernels.get(dtype, variant);
}

}  // namespace floe::detail::sm90
