// sm80 forward: the compiled kernel instantiations, as the planner sees them (no CUDA device
// code here). One entry per (tile, dtype, score-mod kind); each tile's instantiations
// live in their own translation unit (fwd_<tile>.cu, generated from engines/tile_kernels.cu.in) so
// the build parallelises.
#pragma once

#include <cuda_runtime_api.h>

#include "engines/kernel_table.h"
#include "engines/sm80/fwd_params.h"
#include "engines/sm80/fwd_tiles.h"
#include "floe/tensor.h"

namespace floe::detail::sm80 {

// One launch of the forward kernel on a grid of `grid` CTAs.
using FwdKernel = KernelEntry<FwdParams, unsigned>;
// A tile's variants beside the dtype: the score-mod kinds (TileKernels' default).
using FwdVariant = kernels::ScoreMod;

// nullptr: that instantiation is not built in this kernel set (FLOE_KERNELS=ci builds d128 only).
const FwdKernel* fwd_kernel_d64(DType dtype, kernels::ScoreMod mod);
const FwdKernel* fwd_kernel_d128(DType dtype, kernels::ScoreMod mod);
const FwdKernel* fwd_kernel_d192_128(DType dtype, kernels::ScoreMod mod);
const FwdKernel* fwd_kernel_d256(DType dtype, kernels::ScoreMod mod);
const FwdKernel* fwd_kernel_d256_m64(DType dtype, kernels::ScoreMod mod);

// The serving instantiations (ragged sides, paged K/V: kernels/sm80/serving_rows.h), likewise.
const FwdKernel* fwd_serving_kernel_d64(DType dtype, kernels::ScoreMod mod);
const FwdKernel* fwd_serving_kernel_d128(DType dtype, kernels::ScoreMod mod);
const FwdKernel* fwd_serving_kernel_d192_128(DType dtype, kernels::ScoreMod mod);
const FwdKernel* fwd_serving_kernel_d256(DType dtype, kernels::ScoreMod mod);
const FwdKernel* fwd_serving_kernel_d256_m64(DType dtype, kernels::ScoreMod mod);

inline const FwdKernel* find_fwd_kernel(FwdTile tile, DType dtype, kernels::ScoreMod mod,
                                        bool serving = false) {
  static constexpr TileLookup<FwdKernel> kLookups[kFwdTileCount] = {
      &fwd_kernel_d64, &fwd_kernel_d128, &fwd_kernel_d192_128, &fwd_kernel_d256,
      &fwd_kernel_d256_m64};
  static constexpr TileLookup<FwdKernel> kServingLookups[kFwdTileCount] = {
      &fwd_serving_kernel_d64, &fwd_serving_kernel_d128, &fwd_serving_kernel_d192_128,
      &fwd_serving_kernel_d256, &fwd_serving_kernel_d256_m64};
  return find_kernel(serving ? kServingLookups : kLookups, tile, dtype, mod);
}

}  // namespace floe::detail::sm80
