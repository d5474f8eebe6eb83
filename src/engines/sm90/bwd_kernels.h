// sm90 backward: the compiled instantiations, as the planner sees them (no device code here).
// One entry per (tile, dtype); each tile's instantiations live in their own translation unit
// (bwd_<tile>.cu, generated from engines/tile_kernels.cu.in). An entry launches the whole
// backward: preprocess, main kernel, dQ convert.
#pragma once

#include <cuda_runtime_api.h>

#include "engines/kernel_table.h"
#include "engines/sm90/bwd_params.h"
#include "engines/sm90/bwd_tiles.h"
#include "floe/tensor.h"

namespace floe::detail::sm90 {

struct BwdGrids {
  unsigned query_tiles = 0;  // preprocess and dQ convert: num_m_blocks * h_q * b
  unsigned key_tiles = 0;    // main kernel: num_n_blocks * h_kv * b
};

using BwdKernel = KernelEntry<BwdParams, BwdGrids>;
// A tile's instantiations differ by dtype alone (no score mods in sm90's backward yet).
using BwdVariants = DtypeOnlyVariants;
using BwdVariant = BwdVariants::Variant;

// nullptr: that instantiation is not built in this kernel set (FLOE_KERNELS=ci builds d128 only).
const BwdKernel* bwd_kernel_d64(DType dtype, BwdVariant variant);
const BwdKernel* bwd_kernel_d128(DType dtype, BwdVariant variant);
const BwdKernel* bwd_kernel_d192_128(DType dtype, BwdVariant variant);

inline const BwdKernel* find_bwd_kernel(BwdTile tile, DType dtype) {
  static constexpr TileLookup<BwdKernel, BwdVariant> kLookups[kBwdTileCount] = {
      &bwd_kernel_d64, &bwd_kernel_d128, &bwd_kernel_d192_128};
  return find_kernel(kLookups, tile, dtype, BwdVariant::plain);
}

}  // namespace floe::detail::sm90
