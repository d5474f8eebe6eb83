// sm90 forward: the compiled kernel instantiations, as the planner sees them (no CUDA device
// code here). One entry per (tile, dtype, variant); each tile's instantiations live in their own
// translation unit (fwd_<tile>.cu, generated from engines/tile_kernels.cu.in) so the build
// parallelises.
#pragma once

#include <cuda_runtime_api.h>

#include "engines/kernel_table.h"
#include "engines/sm90/fwd_params.h"
#include "engines/sm90/fwd_tiles.h"
#include "floe/tensor.h"

namespace floe::detail::sm90 {

// One launch of the forward kernel on a grid of `grid` CTAs.
using FwdKernel = KernelEntry<FwdParams, unsigned>;

// A tile's variants beside the dtype: the plain kernel; the score-mod one (softcap, bias, and a
// sink beside them), named <base>_<dtype>_score_mod; the sink one (a sink alone: the plain main
// loop, the sink folded in by the epilogue), named <base>_<dtype>_sink; the plain kernel with
// pingpong between its two consumer warpgroups (short sequences: one warpgroup's softmax and
// epilogue run under the other's products), named <base>_<dtype>_pingpong (d128 only, where it
// was measured; the other tiles' entry is their plain kernel again).
enum class FwdVariant : int { plain = 0, score_mod = 1, sink = 2, pingpong = 3 };
struct FwdVariants {
  using Variant = FwdVariant;
  static constexpr int kCount = 4;
  static constexpr const char* suffix(FwdVariant v) {
    return v == FwdVariant::score_mod  ? "score_mod"
           : v == FwdVariant::sink     ? "sink"
           : v == FwdVariant::pingpong ? "pingpong"
                                       : "";
  }
};

// The serving kernel's one variant beside the dtype (ragged sides; fwd_launch.cuh's ServingTraits):
// looked up as FwdVariant::plain.
struct FwdServingVariants {
  using Variant = FwdVariant;
  static constexpr int kCount = 1;
  static constexpr const char* suffix(FwdVariant) { return ""; }
};

// nullptr: that instantiation is not built in this kernel set (FLOE_KERNELS=ci builds d128 only).
const FwdKernel* fwd_kernel_d64(DType dtype, FwdVariant variant);
const FwdKernel* fwd_kernel_d128(DType dtype, FwdVariant variant);
const FwdKernel* fwd_kernel_d256(DType dtype, FwdVariant variant);
const FwdKernel* fwd_kernel_d192_128(DType dtype, FwdVariant variant);

// The serving instantiations (fwd_serving_<tile>.cu), likewise.
const FwdKernel* fwd_serving_kernel_d64(DType dtype, FwdVariant variant);
const FwdKernel* fwd_serving_kernel_d128(DType dtype, FwdVariant variant);
const FwdKernel* fwd_serving_kernel_d256(DType dtype, FwdVariant variant);
const FwdKernel* fwd_serving_kernel_d192_128(DType dtype, FwdVariant variant);

inline const FwdKernel* find_fwd_serving_kernel(FwdTile tile, DType dtype) {
  static constexpr TileLookup<FwdKernel, FwdVariant> kLookups[kFwdTileCount] = {
      &fwd_serving_kernel_d64, &fwd_serving_kernel_d128, &fwd_serving_kernel_d256,
      &fwd_serving_kernel_d192_128};
  return find_kernel(kLookups, tile, dtype, FwdVariant::plain);
}

inline const FwdKernel* find_fwd_kernel(FwdTile tile, DType dtype, bool score_mod = false,
                                        bool sink = false, bool pingpong = false) {
  static constexpr TileLookup<FwdKernel, FwdVariant> kLookups[kFwdTileCount] = {
      &fwd_kernel_d64, &fwd_kernel_d128, &fwd_kernel_d256, &fwd_kernel_d192_128};
  return find_kernel(kLookups, tile, dtype,
                     score_mod  ? FwdVariant::score_mod
                     : sink     ? FwdVariant::sink
                     : pingpong ? FwdVariant::pingpong
                                : FwdVariant::plain);
}

}  // namespace floe::detail::sm90
