// sm80 backward: the compiled tiles and their shapes, per head-dim class (head_dim_tile.h). Plain
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
  int q_stages;    // Q and dO buffers: 2 = the next visit's load under this one, 1 = loaded
                   // after it (parts with less shared memory)

  constexpr int threads() const { return warps * 32; }
  // Q and dO (q_stages each), K, V, then P and dS (block_m x block_n each); 2-byte elements.
  constexpr int smem_bytes() const {
    return 2 * (q_stages * block_m * d_qk + q_stages * block_m * d_v + block_n * (d_qk + d_v) +
                2 * block_m * block_n);
  }
};

// The compiled backward tiles: one per head-dim class for the H200 and H100 (227 KB of shared
// memory per block), then the smaller ones of the parts with less: d256q1 for the A100's 163 KB,
// and d64m64, d128q1, d192x128q1, d256m32 for the 99 KB of sm_86/sm_89.
enum class BwdTile : int {
  d64 = 0,
  d128 = 1,
  d192_128 = 2,
  d256 = 3,
  d64_m64 = 4,
  d128_q1 = 5,
  d192_128_q1 = 6,
  d256_q1 = 7,
  d256_m32 = 8,
};
inline constexpr int kBwdTileCount = 9;

// FlashAttention-2's shapes for these head dims (8 warps; 128 keys a CTA so each dK/dV row
// block amortises the Q/dO traffic; 64 query rows at d128, where the dK and dV accumulators
// take 128 registers a thread). The wide tiles own 64 keys and visit 64 query rows at a time
// (dK, dV and the dQ product then take 64 + 64 + 64 registers at d256).
// The smaller tiles keep the atoms of the H200 tiles (d64m64 those of d64, the q1 tiles those of
// d192x128 and d256) and change only the query rows a visit or the Q/dO buffers (FlashAttention
// 2's backward traits have the same no-double-buffer option for such parts).
inline constexpr BwdTileShape kBwdTiles[kBwdTileCount] = {
    /* d64         */ {64, 64, 128, 128, 8, 4, 4, 4, 2},   // 160 KB smem
    /* d128        */ {128, 128, 64, 128, 8, 2, 4, 2, 2},  // 160 KB
    /* d192x128    */ {192, 128, 64, 64, 8, 4, 2, 2, 2},   // 136 KB
    /* d256        */ {256, 256, 64, 64, 8, 4, 2, 2, 2},   // 208 KB: H100 / H200 class parts only
    /* d64_m64     */ {64, 64, 64, 128, 8, 4, 4, 4, 2},    //  96 KB: sm_86 / sm_89
    /* d128_q1     */ {128, 128, 64, 64, 8, 4, 2, 2, 1},   //  80 KB: sm_86 / sm_89
    /* d192_128_q1 */ {192, 128, 64, 64, 8, 4, 2, 2, 1},   //  96 KB: sm_86 / sm_89
    /* d256_q1     */ {256, 256, 64, 64, 8, 4, 2, 2, 1},   // 144 KB: A100 class
    // 99 KB: K and V of 64 keys take 64 KB, and 8 warps need 32 x 64 (query, key) a step, so
    // 32 keys and 4 warps (dK and dV take 128 registers a thread), 32 query rows, one buffer.
    /* d256_m32    */ {256, 256, 32, 32, 4, 2, 2, 2, 1},  //  68 KB: sm_86 / sm_89
};

inline constexpr const BwdTileShape& bwd_tile_shape(BwdTile t) {
  return kBwdTiles[static_cast<int>(t)];
}

inline constexpr const char* kBwdTileNames[kBwdTileCount] = {
    "d64", "d128", "d192x128", "d256", "d64m64", "d128q1", "d192x128q1", "d256q1", "d256m32"};
inline constexpr const char* bwd_tile_name(BwdTile t) {
  return kBwdTileNames[static_cast<int>(t)];
}

// The instantiations' names in messages are "<base>_<dtype>_<score-mod kind>"
// (kernel_table.h), e.g. sm80_bwd_d128_bf16_bias; the base by tile:
inline constexpr const char* kBwdKernelBases[kBwdTileCount] = {
    "sm80_bwd_d64",        "sm80_bwd_d128",   "sm80_bwd_d192x128",
    "sm80_bwd_d256",       "sm80_bwd_d64m64", "sm80_bwd_d128q1",
    "sm80_bwd_d192x128q1", "sm80_bwd_d256q1", "sm80_bwd_d256m32"};

// The serving instantiations' names (ragged sides), likewise.
inline constexpr const char* kBwdServingKernelBases[kBwdTileCount] = {
    "sm80_bwd_serving_d64",        "sm80_bwd_serving_d128",   "sm80_bwd_serving_d192x128",
    "sm80_bwd_serving_d256",       "sm80_bwd_serving_d64m64", "sm80_bwd_serving_d128q1",
    "sm80_bwd_serving_d192x128q1", "sm80_bwd_serving_d256q1", "sm80_bwd_serving_d256m32"};

// The tiles of each head-dim class, preferred first.
inline constexpr BwdTile kBwdClassTiles[kHeadDimTileCount][kTilesPerClass] = {
    {BwdTile::d64, BwdTile::d64_m64, BwdTile::d64_m64},
    {BwdTile::d128, BwdTile::d128_q1, BwdTile::d128_q1},
    {BwdTile::d192_128, BwdTile::d192_128_q1, BwdTile::d192_128_q1},
    {BwdTile::d256, BwdTile::d256_q1, BwdTile::d256_m32}};

// The tile of class `dims` for a part with `smem_limit` bytes of shared memory per block.
inline constexpr BwdTile bwd_tile_for(HeadDimTile dims, size_t smem_limit) {
  return first_fitting(kBwdClassTiles[static_cast<int>(dims)], smem_limit,
                       [](BwdTile t) { return bwd_tile_shape(t).smem_bytes(); });
}

}  // namespace floe::detail::sm80
