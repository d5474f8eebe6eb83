// sm90 backward: the host side of one instantiation (shared-memory opt-in, the three launches)
// and the table of a tile's instantiations. Included only by the bwd_<tile>.cu files.
#pragma once

#include <cuda_runtime_api.h>

#include "engines/sm90/bwd_dq_convert.cuh"
#include "engines/sm90/bwd_kernel.cuh"
#include "engines/sm90/bwd_kernels.h"
#include "engines/sm90/bwd_preprocess.cuh"
#include "engines/sm90/bwd_traits.cuh"

namespace floe::detail::sm90 {

// dQ overlapped with dV and dK, one dS buffer (two measured 532 against 537 TFLOP/s at d128 S 16k
// in the dev harness); the tile sets the query rows and the issue order (bwd_tiles.h).
template <BwdTile kTile, class Element>
using BwdTraits =
    BwdTraitsOf<Element, bwd_tile_shape(kTile).d, bwd_tile_shape(kTile).block_m,
                bwd_tile_shape(kTile).block_n, bwd_tile_shape(kTile).stages,
                /*kOverlapDq=*/true, /*kDoubleBufferDs=*/false, bwd_tile_shape(kTile).dq_before_dk>;

template <class T>
cudaError_t bwd_prepare() {
  return cudaFuncSetAttribute(bwd_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              T::kSmemBytes);
}

template <class T>
cudaError_t bwd_launch(const BwdParams& params, const BwdGrids& grids, cudaStream_t stream) {
  using Element = typename T::Element;
  bwd_preprocess_kernel<Element, T::kBlockM><<<grids.query_tiles, 256, 0, stream>>>(params);
  bwd_kernel<T><<<grids.key_tiles, T::kThreads, T::kSmemBytes, stream>>>(params);
  bwd_dq_convert_kernel<T><<<grids.query_tiles, T::kConsumerThreads, 0, stream>>>(params);
  return cudaGetLastError();
}

template <class T>
constexpr BwdKernel bwd_entry(const char* name) {
  return BwdKernel{name,
                   T::kThreads,
                   T::kSmemBytes,
                   T::kBlockM,
                   T::kBlockN,
                   &bwd_prepare<T>,
                   &bwd_launch<T>,
                   {{&bwd_preprocess_kernel<typename T::Element, T::kBlockM>, 256, 0},
                    {&bwd_kernel<T>, T::kThreads, T::kSmemBytes},
                    {&bwd_dq_convert_kernel<T>, T::kConsumerThreads, 0}}};
}

// A tile's instantiations: f16 and bf16.
template <BwdTile kTile>
struct BwdTileKernels {
  static const BwdKernel* get(DType dtype) {
    constexpr int i = static_cast<int>(kTile);
    static const BwdKernel bf16 =
        bwd_entry<BwdTraits<kTile, cute::bfloat16_t>>(kBwdKernelNames[i][1]);
    if (dtype == DType::bf16) return &bf16;
    static const BwdKernel f16 = bwd_entry<BwdTraits<kTile, cute::half_t>>(kBwdKernelNames[i][0]);
    if (dtype == DType::f16) return &f16;
    return nullptr;
  }
};

}  // namespace floe::detail::sm90
