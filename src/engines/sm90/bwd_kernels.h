// sm90 backward: the compiled instantiations, as the planner sees them (no device code here).
// One entry per (tile, dtype); each tile's instantiations live in their own translation unit
// (bwd_<tile>.cu, generated from engines/tile_kernels.cu.in). An entry launches the whole
// backward: preprocess, main kernel, dQ convert, and in the _dsink variants the dSink sum.
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
  unsigned heads = 0;        // dSink: h_q
  // The bias kernel's dBias conversion: (query tile, key tile) x the summed dBias's batches and
  // heads; 0 where dBias is not summed (the step is skipped).
  unsigned dbias_tiles = 0;
};

using BwdKernel = KernelEntry<BwdParams, BwdGrids>;
// A tile's variants beside the dtype: the plain main kernel or the softcap one (it recomputes
// s2 = cap_log2 * tanh(q.k * scale / cap) and multiplies dS by d tanh), each without or with a
// fourth step that sums dSink (bwd_dsink.cuh; a sink alone needs nothing else, its weight is in
// the LSE). Names: <base>_<dtype>[_softcap][_dsink]. The _dsink variants launch the same main
// kernels, so a tile compiles two main kernels a dtype.
enum class BwdVariant : int { plain = 0, softcap = 1, dsink = 2, softcap_dsink = 3 };
struct BwdVariants {
  using Variant = BwdVariant;
  static constexpr int kCount = 4;
  static constexpr const char* suffix(BwdVariant v) {
    return v == BwdVariant::softcap         ? "softcap"
           : v == BwdVariant::dsink         ? "dsink"
           : v == BwdVariant::softcap_dsink ? "softcap_dsink"
                                            : "";
  }
};
inline constexpr bool has_softcap(BwdVariant v) {
  return v == BwdVariant::softcap || v == BwdVariant::softcap_dsink;
}
inline constexpr bool has_dsink(BwdVariant v) {
  return v == BwdVariant::dsink || v == BwdVariant::softcap_dsink;
}

// The bias kernel (bwd_bias.cuh; its own translation unit a tile, bwd_bias_<tile>.cu), without or
// with the dSink step: looked up as BwdVariant::plain or ::dsink (the softcap indices name the same
// kernels: a bias with a softcap is declined). Names: <base>_<dtype>_bias[_dsink].
struct BwdBiasVariants {
  using Variant = BwdVariant;
  static constexpr int kCount = 4;
  static constexpr const char* suffix(BwdVariant v) { return has_dsink(v) ? "bias_dsink" : "bias"; }
};

// nullptr: that instantiation is not built in this kernel set (FLOE_KERNELS=ci builds d128 only).
const BwdKernel* bwd_kernel_d64(DType dtype, BwdVariant variant);
const BwdKernel* bwd_kernel_d128(DType dtype, BwdVariant variant);
const BwdKernel* bwd_kernel_d192_128(DType dtype, BwdVariant variant);
const BwdKernel* bwd_kernel_d128_m64(DType dtype, BwdVariant variant);
const BwdKernel* bwd_kernel_d256(DType dtype, BwdVariant variant);

// nullptr also where the tile has no bias kernel (bwd_tiles.h's `bias`).
const BwdKernel* bwd_bias_kernel_d64(DType dtype, BwdVariant variant);
const BwdKernel* bwd_bias_kernel_d128(DType dtype, BwdVariant variant);
const BwdKernel* bwd_bias_kernel_d192_128(DType dtype, BwdVariant variant);
const BwdKernel* bwd_bias_kernel_d128_m64(DType dtype, BwdVariant variant);
const BwdKernel* bwd_bias_kernel_d256(DType dtype, BwdVariant variant);

inline const BwdKernel* find_bwd_kernel(BwdTile tile, DType dtype, bool softcap = false,
                                        bool dsink = false, bool bias = false) {
  static constexpr TileLookup<BwdKernel, BwdVariant> kLookups[kBwdTileCount] = {
      &bwd_kernel_d64, &bwd_kernel_d128, &bwd_kernel_d192_128, &bwd_kernel_d128_m64,
      &bwd_kernel_d256};
  static constexpr TileLookup<BwdKernel, BwdVariant> kBiasLookups[kBwdTileCount] = {
      &bwd_bias_kernel_d64, &bwd_bias_kernel_d128, &bwd_bias_kernel_d192_128,
      &bwd_bias_kernel_d128_m64, &bwd_bias_kernel_d256};
  if (bias) {
    if (softcap) return nullptr;
    return find_kernel(kBiasLookups, tile, dtype, dsink ? BwdVariant::dsink : BwdVariant::plain);
  }
  const BwdVariant v = softcap ? (dsink ? BwdVariant::softcap_dsink : BwdVariant::softcap)
                               : (dsink ? BwdVariant::dsink : BwdVariant::plain);
  return find_kernel(kLookups, tile, dtype, v);
}

}  // namespace floe::detail::sm90
