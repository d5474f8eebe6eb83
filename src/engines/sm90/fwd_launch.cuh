// sm90 forward: the host side of one instantiation (shared-memory opt-in, launch) and the table
// of a tile's instantiations. Included only by the fwd_<tile>.cu files.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <type_traits>

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

  static LaunchSteps steps() {
    LaunchSteps s;
    s.step[0] = {reinterpret_cast<const void*>(&fwd_kernel<T>), T::kThreads, T::kSmemBytes};
    s.count = 1;
    return s;
  }
};

// The plain kernel's sink sibling: its main loop, and the sink in the epilogue. A sink alone costs
// 3-4% in the score-mod kernel (measured; its main loop carries the softcap's and the bias's code),
// while the sink in the plain kernel itself slowed plain problems by 0.4-4% (ptxas scheduled its
// main loop differently): hence a kernel of its own (H200 measurements in README.md).
template <class Base>
struct SinkTraits : Base {
  static constexpr bool kSink = true;
};

// The plain kernel with pingpong: d128's, the tile it was measured on (session 9); elsewhere the
// plain kernel itself, the same instantiation (the plan never asks for it there).
template <FwdTile kTile, class Element>
using PingpongTraits = std::conditional_t<
    kTile == FwdTile::d128 && fwd_tile_shape(kTile).consumer_warpgroups == 2,
    FwdTraitsOf<Element, fwd_tile_shape(kTile).d, fwd_tile_shape(kTile).block_n,
                fwd_tile_shape(kTile).consumer_warpgroups, fwd_tile_shape(kTile).stages, true,
                false, fwd_tile_shape(kTile).d_v()>,
    FwdTraits<kTile, Element>>;

// The serving kernel (ragged sides: rows at a batch's slot in the packed tensors, writes predicated
// to the slot) over the kernel the plan takes for short sequences, d128's pingpong sibling (a
// packed batch's sequences are mostly short; pingpong measured within 1% of plain at 16k), the
// plain kernel elsewhere. No score mods (the plan declines them with a ragged side).
template <class Base>
struct ServingTraits : Base {
  static constexpr bool kServing = true;
  // The producer reads a paged tile's pages into registers before it issues the boxes
  // (fwd_mainloop.cuh's PagedBoxes): 32 a thread where three consumer warpgroups leave them
  // (128 x 32 + 384 x 160 = 65536, all a 512-thread CTA holds); two at 240 leave 24
  // (register_budget.h: 32 there hung the consumers' setmaxnreg).
  static constexpr int kProducerRegs = Base::kConsumerWarpgroups == 3 ? 32 : 24;
};

template <FwdTile kTile>
struct FwdTileInstances {
  // The planner takes the tile's rows from fwd_tiles.h (its TMA boxes).
  static_assert(FwdTraits<kTile, cute::half_t>::kBlockM == fwd_tile_shape(kTile).block_m);
  template <class Element, FwdVariant kVariant>
  using Instance = FwdInstanceOf<std::conditional_t<
      kVariant == FwdVariant::sink, SinkTraits<FwdTraits<kTile, Element>>,
      std::conditional_t<kVariant == FwdVariant::pingpong, PingpongTraits<kTile, Element>,
                         FwdTraits<kTile, Element, kVariant == FwdVariant::score_mod>>>>;
};

// The instantiations of a tile: {f16, bf16} x {plain, score-mod, sink, pingpong}.
template <FwdTile kTile>
const FwdKernel* fwd_tile_kernel(DType dtype, FwdVariant variant) {
  static const TileKernels<FwdKernel, FwdVariants> kernels(
      std::string("sm90_fwd_") + fwd_tile_shape(kTile).name,
      InstanceTag<FwdVariant, FwdTileInstances<kTile>::template Instance>{},
      static_cast<cute::half_t*>(nullptr), static_cast<cute::bfloat16_t*>(nullptr));
  return kernels.get(dtype, variant);
}

// The serving instantiations of a tile, in their own translation unit (fwd_serving_<tile>.cu): one
// per dtype (FwdServingVariants), named sm90_fwd_serving_<tile>_<dtype>.
template <FwdTile kTile>
struct FwdServingInstances {
  template <class Element, FwdVariant>
  using Instance = FwdInstanceOf<ServingTraits<PingpongTraits<kTile, Element>>>;
};

template <FwdTile kTile>
const FwdKernel* fwd_serving_tile_kernel(DType dtype, FwdVariant variant) {
  static const TileKernels<FwdKernel, FwdServingVariants> kernels(
      std::string("sm90_fwd_serving_") + fwd_tile_shape(kTile).name,
      InstanceTag<FwdVariant, FwdServingInstances<kTile>::template Instance>{},
      static_cast<cute::half_t*>(nullptr), static_cast<cute::bfloat16_t*>(nullptr));
  return kernels.get(dtype, variant);
}

}  // namespace floe::detail::sm90
