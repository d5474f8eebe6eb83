// sm90 backward: the host side of one instantiation (shared-memory opt-in, the three launches)
// and the table of a tile's instantiations. Included only by the bwd_<tile>.cu files.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "engines/sm90/bwd_dq_convert.cuh"
#include "engines/sm90/bwd_kernel.cuh"
#include "engines/sm90/bwd_kernels.h"
#include "engines/sm90/bwd_preprocess.cuh"
#include "engines/sm90/bwd_traits.cuh"

namespace floe::detail::sm90 {

// dQ overlapped with dV and dK, one dS buffer (two measured 532 against 537 TFLOP/s at d128 S 16k
// in the dev harness); the tile sets the query rows and the issue order (bwd_tiles.h).
template <BwdTile kTile, class Element>
using BwdTraits = BwdTraitsOf<Element, bwd_tile_shape(kTile).d, bwd_tile_shape(kTile).block_m,
                              bwd_tile_shape(kTile).block_n, bwd_tile_shape(kTile).stages,
                              bwd_tile_shape(kTile).overlap_dq, /*kDoubleBufferDs=*/false,
                              bwd_tile_shape(kTile).dq_before_dk, bwd_tile_shape(kTile).d_v()>;

template <class T>
struct BwdInstanceOf {
  static constexpr int kThreads = T::kThreads;
  static constexpr int kSmemBytes = T::kSmemBytes;

  static cudaError_t prepare() {
    return cudaFuncSetAttribute(bwd_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                T::kSmemBytes);
  }

  static cudaError_t launch(const BwdParams& params, const BwdGrids& grids, cudaStream_t stream) {
    using Element = typename T::Element;
    bwd_preprocess_kernel<Element, T::kBlockM><<<grids.query_tiles, 256, 0, stream>>>(params);
    bwd_kernel<T><<<grids.key_tiles, T::kThreads, T::kSmemBytes, stream>>>(params);
    bwd_dq_convert_kernel<T><<<grids.query_tiles, T::kConsumerThreads, 0, stream>>>(params);
    return cudaGetLastError();
  }

  // The same three kernels for the driver: the key tiles are the main kernel's (step 1) grid,
  // the query tiles the other two's.
  static LaunchSteps steps() {
    using Element = typename T::Element;
    LaunchSteps s;
    s.step[0] = {reinterpret_cast<const void*>(&bwd_preprocess_kernel<Element, T::kBlockM>), 256,
                 0};
    s.step[1] = {reinterpret_cast<const void*>(&bwd_kernel<T>), T::kThreads, T::kSmemBytes};
    s.step[2] = {reinterpret_cast<const void*>(&bwd_dq_convert_kernel<T>), T::kConsumerThreads, 0};
    s.count = 3;
    return s;
  }
};

template <BwdTile kTile>
struct BwdTileInstances {
  template <class Element, BwdVariant>
  using Instance = BwdInstanceOf<BwdTraits<kTile, Element>>;
};

// The instantiations of a tile: f16 and bf16.
template <BwdTile kTile>
const BwdKernel* bwd_tile_kernel(DType dtype, BwdVariant variant) {
  static const TileKernels<BwdKernel, BwdVariants> kernels(
      std::string("sm90_bwd_") + bwd_tile_shape(kTile).name,
      InstanceTag<BwdVariant, BwdTileInstances<kTile>::template Instance>{},
      static_cast<cute::half_t*>(nullptr), static_cast<cute::bfloat16_t*>(nullptr));
  return kernels.get(dtype, variant);
}

}  // namespace floe::detail::sm90
