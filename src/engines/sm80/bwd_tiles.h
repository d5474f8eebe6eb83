// sm80 backward: the tile shapes, one per compiled head-dim tile (head_dim_tile.h). Plain
// constexpr data, read by the planner (host, no CUDA) and by the kernels' traits, so both always
// agree.
#pragma once

#include "engines/sm80/head_dim_tile.h"

namespace floe::detail::sm80 {

struct BwdTileShape {
  int d_qk;        // compiled head-dim tile of q, k (and of the fp32 dQ accumulator rows)
  int d_v;         // compiled head-dim tile of v, o, dO
  int block_m;     // query rows per inner step
  int block_n;     // keys per CTA (the dK/dV rows it owns)
  int warps;       // warps per CTA
  int atom_m_sdp;  // warps along the query rows of S = Q K^T and dP = dO V^T
  int atom_n_dkv;  // warps along the key rows of dK, dV
  int atom_m_dq;   // warps along the query rows of dQ = dS K

  constexpr int threads() const { return warps * 32; }
  // Q and dO double-buffered, K, V, then P and dS (block_m x block_n each); 2-byte elements.
  constexpr int smem_bytes() const {
    return 2 * (2 * block_m * d_qk + 2 * block_m * d_v + block_n * (d_qk + d_v) +
                2 * block_m * block_n);
  }
};

// FlashAttention-2's shapes for these head dims (8 warps; 128 keys a CTA so each dK/dV row
// block amortises the Q/dO traffic; 64 query rows at d128, where the dK and dV accumulators
// take 128 registers a thread). The wide tiles own 64 keys and visit 64 query rows at a time
// (dK, dV and the dQ product then take 64 + 64 + 64 registers at d256).
inline constexpr BwdTileShape kBwdTiles[kHeadDimTileCount] = {
    /* d64      */ {64, 64, 128, 128, 8, 4, 4, 4},   // 160 KB smem
    /* d128     */ {128, 128, 64, 128, 8, 2, 4, 2},  // 160 KB
    /* d192x128 */ {192, 128, 64, 64, 8, 4, 2, 2},   // 136 KB
    /* d256     */ {256, 256, 64, 64, 8, 4, 2, 2},   // 208 KB: H100 / H200 class parts only
};

inline constexpr const BwdTileShape& bwd_tile_shape(HeadDimTile t) {
  return kBwdTiles[static_cast<int>(t)];
}

}  // namespace floe::detail::sm80
