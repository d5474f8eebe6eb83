// sm90 backward: the host side of one instantiation (shared-memory opt-in, the three launches, a
// fourth for dSink) and the table of a tile's instantiations. Included only by the bwd_<tile>.cu
// files.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "engines/sm90/bwd_dbias_convert.cuh"
#include "engines/sm90/bwd_dq_convert.cuh"
#include "engines/sm90/bwd_dsink.cuh"
#include "engines/sm90/bwd_kernel.cuh"
#include "engines/sm90/bwd_kernels.h"
#include "engines/sm90/bwd_preprocess.cuh"
#include "engines/sm90/bwd_traits.cuh"
#include "engines/sm90/bwd_wide_kernel.cuh"
#include "engines/sm90/bwd_wide_traits.cuh"

namespace floe::detail::sm90 {

// dQ overlapped with dV and dK, one dS buffer (two measured 532 against 537 TFLOP/s at d128 S 16k
// in the dev harness); the tile sets the query rows and the issue order (bwd_tiles.h).
// kSoftcap: the softcap main kernel (same tile); kBias: the bias one (not on wide tiles).
template <BwdTile kTile, class Element, bool kSoftcap = false, bool kBias = false>
using BwdTraits = std::conditional_t<
    bwd_tile_shape(kTile).wide,
    BwdWideTraitsOf<Element, bwd_tile_shape(kTile).d, bwd_tile_shape(kTile).block_m,
                    bwd_tile_shape(kTile).block_n, bwd_tile_shape(kTile).stages, kSoftcap>,
    BwdTraitsOf<Element, bwd_tile_shape(kTile).d, bwd_tile_shape(kTile).block_m,
                bwd_tile_shape(kTile).block_n, bwd_tile_shape(kTile).stages,
                bwd_tile_shape(kTile).overlap_dq, /*kDoubleBufferDs=*/false,
                bwd_tile_shape(kTile).dq_before_dk, bwd_tile_shape(kTile).d_v(), kSoftcap, kBias>>;

// The main kernel of a traits type: the wide one where both warpgroups share the keys.
template <class T>
constexpr auto main_kernel() {
  if constexpr (T::kWide) {
    return &bwd_wide_kernel<T>;
  } else {
    return &bwd_kernel<T>;
  }
}

// kDsink: a fourth kernel, after the dQ conversion (it reads the preprocess's chunks only), sums
// dSink; one CTA per query head.
template <class T, bool kDsink>
struct BwdInstanceOf {
  static constexpr int kThreads = T::kThreads;
  static constexpr int kSmemBytes = T::kSmemBytes;

  static cudaError_t prepare() {
    return cudaFuncSetAttribute(main_kernel<T>(), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                T::kSmemBytes);
  }

  static cudaError_t launch(const BwdParams& params, const BwdGrids& grids, cudaStream_t stream) {
    using Element = typename T::Element;
    bwd_preprocess_kernel<Element, T::kBlockM><<<grids.query_tiles, 256, 0, stream>>>(params);
    main_kernel<T>()<<<grids.key_tiles, T::kThreads, T::kSmemBytes, stream>>>(params);
    bwd_dq_convert_kernel<typename T::PlainTraits>
        <<<grids.query_tiles, T::kConsumerThreads, 0, stream>>>(params);
    if constexpr (kDsink) {
      bwd_dsink_kernel<Element, T::kBlockM><<<grids.heads, 256, 0, stream>>>(params);
    }
    if constexpr (T::kBias) {
      if (grids.dbias_tiles > 0) {
        bwd_dbias_convert_kernel<T><<<grids.dbias_tiles, T::kConsumerThreads, 0, stream>>>(params);
      }
    }
    return cudaGetLastError();
  }

  // The same kernels for the driver: the key tiles are the main kernel's (step 1) grid, the
  // heads dSink's (step 3), the dBias tiles the bias kernel's last step's, the query tiles the
  // other two's.
  static LaunchSteps steps() {
    using Element = typename T::Element;
    LaunchSteps s;
    s.step[0] = {reinterpret_cast<const void*>(&bwd_preprocess_kernel<Element, T::kBlockM>), 256,
                 0};
    s.step[1] = {reinterpret_cast<const void*>(main_kernel<T>()), T::kThreads, T::kSmemBytes};
    s.step[2] = {reinterpret_cast<const void*>(&bwd_dq_convert_kernel<typename T::PlainTraits>),
                 T::kConsumerThreads, 0};
    s.count = 3;
    if constexpr (kDsink) {
      s.step[s.count++] = {reinterpret_cast<const void*>(&bwd_dsink_kernel<Element, T::kBlockM>),
                           256, 0};
    }
    // The bias kernel's dBias conversion, last; skipped where dBias is not summed (grid 0).
    if constexpr (T::kBias) {
      s.step[s.count++] = {reinterpret_cast<const void*>(&bwd_dbias_convert_kernel<T>),
                           T::kConsumerThreads, 0};
    }
    return s;
  }
};

template <BwdTile kTile>
struct BwdTileInstances {
  template <class Element, BwdVariant kVariant>
  using Instance =
      BwdInstanceOf<BwdTraits<kTile, Element, has_softcap(kVariant)>, has_dsink(kVariant)>;
};

// The instantiations of a tile: {f16, bf16} x {plain, softcap} x {without, with dSink} (two main
// kernels a dtype).
template <BwdTile kTile>
const BwdKernel* bwd_tile_kernel(DType dtype, BwdVariant variant) {
  static const TileKernels<BwdKernel, BwdVariants> kernels(
      std::string("sm90_bwd_") + bwd_tile_shape(kTile).name,
      InstanceTag<BwdVariant, BwdTileInstances<kTile>::template Instance>{},
      static_cast<cute::half_t*>(nullptr), static_cast<cute::bfloat16_t*>(nullptr));
  return kernels.get(dtype, variant);
}

// The bias kernel's instantiations (bwd_bias_<tile>.cu): {f16, bf16} x {without, with dSink}, one
// main kernel a dtype; none where the tile has no room for the bias ring.
template <BwdTile kTile>
struct BwdBiasTileInstances {
  template <class Element, BwdVariant kVariant>
  using Instance = BwdInstanceOf<BwdTraits<kTile, Element, false, true>, has_dsink(kVariant)>;
};

template <BwdTile kTile>
const BwdKernel* bwd_bias_tile_kernel(DType dtype, BwdVariant variant) {
  if constexpr (!bwd_tile_shape(kTile).bias) {
    (void)dtype;
    (void)variant;
    return nullptr;
  } else {
    static const TileKernels<BwdKernel, BwdBiasVariants> kernels(
        std::string("sm90_bwd_") + bwd_tile_shape(kTile).name,
        InstanceTag<BwdVariant, BwdBiasTileInstances<kTile>::template Instance>{},
        static_cast<cute::half_t*>(nullptr), static_cast<cute::bfloat16_t*>(nullptr));
    return kernels.get(dtype, variant);
  }
}

}  // namespace floe::detail::sm90
