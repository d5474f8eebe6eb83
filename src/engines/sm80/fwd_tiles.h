// sm80 forward: the tile shapes, one per compiled head-dim tile (head_dim_tile.h). Plain
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

// Measured on the H200 (bf16, 16k tokens): 128-row query tiles with 32 rows per warp (so each
// K/V fragment read from shared memory feeds two m16 row blocks) where the registers allow; one
// K and one V buffer alternating (FlashAttention-2 style) beat double buffering on every head
// dim but 192/128, whose 32-key tiles leave too little work to hide a load under. Every tile
// but d256 fits the 99 KB of sm_86/sm_89.
inline constexpr FwdTileShape kFwdTiles[kHeadDimTileCount] = {
    /* d64      */ {64, 64, 128, 128, 4, 1, 2},   //  48 KB smem
    /* d128     */ {128, 128, 128, 64, 4, 1, 2},  //  64 KB
    /* d192_128 */ {192, 128, 128, 32, 4, 2, 2},  //  88 KB
    /* d256     */ {256, 256, 128, 64, 8, 1, 1},  // 128 KB: 16 rows per warp (acc_o is 128 regs)
};

inline constexpr const FwdTileShape& fwd_tile_shape(HeadDimTile t) {
  return kFwdTiles[static_cast<int>(t)];
}

}  // namespace floe::detail::sm80
