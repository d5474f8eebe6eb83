// sm80 backward: the compiled instantiations, as the planner sees them (no device code here).
// One entry per (tile, dtype, score-mod kind); each tile's instantiations live in their
// own translation unit (bwd_<tile>.cu, generated from engines/tile_kernels.cu.in) so the build
// parallelises. An entry launches the whole backward:
// preprocess, main kernel (which also sums a broadcast dBias), dQ epilogue, and the dSink
// kernel when the problem has one.
#pragma once

#include <cuda_runtime_api.h>

#include "engines/kernel_table.h"
#include "engines/sm80/bwd_params.h"
#include "engines/sm80/bwd_tiles.h"
#include "floe/tensor.h"

namespace floe::detail::sm80 {

struct BwdGrids {
  unsigned query_tiles = 0;  // preprocess and dQ epilogue: num_m_blocks * h_q * b
  unsigned key_tiles = 0;    // main kernel: num_n_blocks * h_kv * b
  unsigned heads = 0;        // dSink: h_q
};

using BwdKernel = KernelEntry<BwdParams, BwdGrids>;
// A tile's variants beside the dtype: the score-mod kinds (TileKernels' default).
using BwdVariant = kernels::ScoreMod;

// nullptr: that instantiation is not built in this kernel set (FLOE_KERNELS=ci builds d128 only).
const BwdKernel* bwd_kernel_d64(DType dtype, kernels::ScoreMod mod);
const BwdKernel* bwd_kernel_d128(DType dtype, kernels::ScoreMod mod);
const BwdKernel* bwd_kernel_d192_128(DType dtype, kernels::ScoreMod mod);
const BwdKernel* bwd_kernel_d256(DType dtype, kernels::ScoreMod mod);
const BwdKernel* bwd_kernel_d64_m64(DType dtype, kernels::ScoreMod mod);
const BwdKernel* bwd_kernel_d128_q1(DType dtype, kernels::ScoreMod mod);
const BwdKernel* bwd_kernel_d192_128_q1(DType dtype, kernels::ScoreMod mod);
const BwdKernel* bwd_kernel_d256_q1(DType dtype, kernels::ScoreMod mod);
const BwdKernel* bwd_kernel_d256_m32(DType dtype, kernels::ScoreMod mod);

// The serving instantiations (ragged sides: kernels/sm80/serving_rows.h), likewise.
const BwdKernel* bwd_serving_kernel_d64(DType dtype, kernels::ScoreMod mod);
const BwdKernel* bwd_serving_kernel_d128(DType dtype, kernels::ScoreMod mod);
const BwdKernel* bwd_serving_kernel_d192_128(DType dtype, kernels::ScoreMod mod);
const BwdKernel* bwd_serving_kernel_d256(DType dtype, kernels::ScoreMod mod);
const BwdKernel* bwd_serving_kernel_d64_m64(DType dtype, kernels::ScoreMod mod);
const BwdKernel* bwd_serving_kernel_d128_q1(DType dtype, kernels::ScoreMod mod);
const BwdKernel* bwd_serving_kernel_d192_128_q1(DType dtype, kernels::ScoreMod mod);
const BwdKernel* bwd_serving_kernel_d256_q1(DType dtype, kernels::ScoreMod mod);
const BwdKernel* bwd_serving_kernel_d256_m32(DType dtype, kernels::ScoreMod mod);

inline const BwdKernel* find_bwd_kernel(BwdTile tile, DType dtype, kernels::ScoreMod mod,
                                        bool serving = false) {
  static constexpr TileLookup<BwdKernel> kLookups[kBwdTileCount] = {
      &bwd_kernel_d64,         &bwd_kernel_d128,    &bwd_kernel_d192_128,
      &bwd_kernel_d256,        &bwd_kernel_d64_m64, &bwd_kernel_d128_q1,
      &bwd_kernel_d192_128_q1, &bwd_kernel_d256_q1, &bwd_kernel_d256_m32};
  static constexpr TileLookup<BwdKernel> kServingLookups[kBwdTileCount] = {
      &bwd_serving_kernel_d64,         &bwd_serving_kernel_d128,    &bwd_serving_kernel_d192_128,
      &bwd_serving_kernel_d256,        &bwd_serving_kernel_d64_m64, &bwd_serving_kernel_d128_q1,
      &bwd_serving_kernel_d192_128_q1, &bwd_serving_kernel_d256_q1, &bwd_serving_kernel_d256_m32};
  return find_kernel(serving ? kServingLookups : kLookups, tile, dtype, mod);
}

}  // namespace floe::detail::sm80
