// sm80 forward: the compiled tiles and their shapes, per head-dim class (head_dim_tile.h). Plain
// constexpr data, read by the planner (host, no CUDA) and by the kernels' traits, so both always
// agree.
#pragma once

#include "engines/sm80/head_dim_tile.h"

namespace floe::detail::sm80 {

struct FwdTileShape {
  int d_qk;      // compiled head-dim tile of q and k; columns past the true d_qk are zero-filled
  int d_v;       // compiled head-dim tile of v and o; columns past the true d_v are skipped
  int block_m;   // query rows per CTA
  int block_n;   // keys per main-loop step
  int warps;     // warps per CTA, stacked along the query rows (16 rows per warp per MMA row)
  int stages;    // K and V tiles in flight: 1 = alternate K and V (FlashAttention-2 style), 2 =
                 // double-buffered
  int min_ctas;  // CTAs per SM the register budget is sized for (__launch_bounds__)

  constexpr int threads() const { return warps * 32; }
  // Q (also the staging area of O), then `stages` K tiles, then `stages` V tiles; 2-byte elements.
  constexpr int smem_bytes() const {
    return 2 * (block_m * d_qk + stages * block_n * (d_qk + d_v));
  }
};

// The compiled forward tiles: one per head-dim class for the H200 and every part with at least
// 128 KB of shared memory per block, and d256m64 for the 99 KB of sm_86/sm_89.
enum class FwdTile : int { d64 = 0, d128 = 1, d192_128 = 2, d256 = 3, d256_m64 = 4 };
inline constexpr int kFwdTileCount = 5;

// Measured on the H200 (bf16, 16k tokens): 128-row query tiles with 32 rows per warp (so each
// K/V fragment read from shared memory feeds two m16 row blocks) where the registers allow; one
// K and one V buffer alternating (FlashAttention-2 style) beat double buffering on every head
// dim but 192/128, whose 32-key tiles leave too little work to hide a load under. Every tile
// but d256 fits the 99 KB of sm_86/sm_89; d256m64 is the 64x64, 4-warp variant measured on the
// H200 at 327/337 TFLOP/s against d256's 334/344 (README.md).
inline constexpr FwdTileShape kFwdTiles[kFwdTileCount] = {
    /* d64      */ {64, 64, 128, 128, 4, 1, 2},   //  48 KB smem
    /* d128     */ {128, 128, 128, 64, 4, 1, 2},  //  64 KB
    /* d192_128 */ {192, 128, 128, 32, 4, 2, 2},  //  88 KB
    /* d256     */ {256, 256, 128, 64, 8, 1, 1},  // 128 KB: 16 rows per warp (acc_o is 128 regs)
    /* d256_m64 */ {256, 256, 64, 64, 4, 1, 1},   //  96 KB: sm_86 / sm_89 (99 KB per block)
};

inline constexpr const FwdTileShape& fwd_tile_shape(FwdTile t) {
  return kFwdTiles[static_cast<int>(t)];
}

inline constexpr const char* kFwdTileNames[kFwdTileCount] = {"d64", "d128", "d192x128", "d256",
                                                             "d256m64"};
inline constexpr const char* fwd_tile_name(FwdTile t) {
  return kFwdTileNames[static_cast<int>(t)];
}

// The instantiations' names in messages are "<base>_<dtype>_<score-mod kind>"
// (kernel_table.h), e.g. sm80_fwd_d128_bf16_bias; the base by tile:
inline constexpr const char* kFwdKernelBases[kFwdTileCount] = {
    "sm80_fwd_d64", "sm80_fwd_d128", "sm80_fwd_d192x128", "sm80_fwd_d256", "sm80_fwd_d256m64"};

// The serving instantiations' names (ragged sides, paged K/V), likewise.
inline constexpr const char* kFwdServingKernelBases[kFwdTileCount] = {
    "sm80_fwd_serving_d64", "sm80_fwd_serving_d128", "sm80_fwd_serving_d192x128",
    "sm80_fwd_serving_d256", "sm80_fwd_serving_d256m64"};

// The tiles of each head-dim class, preferred first.
inline constexpr FwdTile kFwdClassTiles[kHeadDimTileCount][kTilesPerClass] = {
    {FwdTile::d64, FwdTile::d64, FwdTile::d64},
    {FwdTile::d128, FwdTile::d128, FwdTile::d128},
    {FwdTile::d192_128, FwdTile::d192_128, FwdTile::d192_128},
    {FwdTile::d256, FwdTile::d256_m64, FwdTile::d256_m64}};

// The tile of class `dims` for a part with `smem_limit` bytes of shared memory per block.
inline constexpr FwdTile fwd_tile_for(HeadDimTile dims, size_t smem_limit) {
  return first_fitting(kFwdClassTiles[static_cast<int>(dims)], smem_limit,
                       [](FwdTile t) { return fwd_tile_shape(t).smem_bytes(); });
}

}  // namespace floe::detail::sm80
