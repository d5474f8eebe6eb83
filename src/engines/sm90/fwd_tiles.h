// sm90 forward: the compiled head-dim tiles and their shapes. Plain constexpr data, read by the
// planner (host, no CUDA) and by the kernels' traits, so both always agree.
#pragma once

namespace floe::detail::sm90 {

enum class FwdTile : int { d64 = 0, d128 = 1, d256 = 2, d192_128 = 3 };
inline constexpr int kFwdTileCount = 4;

struct FwdTileShape {
  const char* name;
  int d;        // d_qk: the tile serves exactly this head dim (TMA boxes are whole tiles)
  int block_m;  // query rows per CTA: 64 per consumer warpgroup
  int block_n;  // keys per main-loop step
  int stages;   // K and V tiles in flight, each through its own mbarrier pipeline
  int consumer_warpgroups;
  bool pingpong;  // the consumer warpgroups take turns on the tensor cores
  int dv = 0;     // d_v where it differs from d_qk (0: d_v = d_qk)

  constexpr int d_v() const { return dv != 0 ? dv : d; }

  constexpr int threads() const { return 128 * (consumer_warpgroups + 1); }
  // Q, then `stages` K and V tiles (and, for the score-mod kernels, bias_stages() bias tiles of
  // block_m x block_n), 2-byte elements, each 1024-byte aligned (the 128-byte swizzle repeats
  // every 8 rows of 128 bytes), then the barriers.
  constexpr int smem_base_bytes(bool score_mod = false) const {
    return qkv_bytes() + (score_mod ? bias_bytes(bias_stages()) : 0);
  }
  constexpr int qkv_bytes() const {
    return 2 * (block_m * d + stages * block_n * (d + d_v())) + 1024;
  }
  constexpr int bias_bytes(int n) const { return 2 * n * block_m * block_n; }
  // The score-mod kernel's bias ring: as deep as K and V's, unless one stage is what lets O keep a
  // buffer of its own (d128: 193 + 32 KB; with two, O would move into Q's buffer and the next
  // tile's Q wait for the epilogue). H200, d128 S 4096, the score-mod kernel without pingpong:
  // sink x1.06 -> x1.04, bias x1.22 either way.
  constexpr int bias_stages() const {
    constexpr int kLimit = 227 * 1024;
    if (qkv_bytes() + bias_bytes(stages) + o_bytes() <= kLimit) return stages;
    if (qkv_bytes() + bias_bytes(1) + o_bytes() <= kLimit) return 1;
    return stages;
  }
  // Where it fits (227 KB a block), the epilogue stages O in a buffer of its own rather than in
  // Q's, so that the next tile's Q loads under the epilogue (a persistent CTA's next tile).
  constexpr int o_bytes() const { return 2 * block_m * d_v(); }
  constexpr bool own_o(bool score_mod = false) const {
    return smem_base_bytes(score_mod) + o_bytes() <= 227 * 1024;
  }
  constexpr int smem_bytes(bool score_mod = false) const {
    return smem_base_bytes(score_mod) + (own_o(score_mod) ? o_bytes() : 0);
  }
};

// Measured on the H200 (bf16, 16k tokens, TFLOP/s, all variants in one call of the dev harness;
// cuDNN 9.19 measured at 466 / 655 / 721 for d64 / d128 / d256 in an earlier call):
// - d64 is co-limited by the exponentials: three consumer warpgroups (192 query rows) keep the
//   tensor cores fed while two of them exponentiate. 192x128 x3: 523 (causal 515); 128x128 x2:
//   457 (454); 128x192 x2: 475 (468).
// - d128: 128x128: 720 (causal 705); 128x176 (extended GMMA N): 724 (causal 672, S 4k 642 vs 665).
// - d256: 128x64: 803 (causal 799); 128x80 (extended N): 782 (784).
// - Three K/V stages (d128: 225 KB of smem): d128 S 16k 708 against 692 with two, causal 670
//   against 693; d64 (192x128) 520 against 544. Two kept.
// - Pingpong between two consumer warpgroups, on top of the overlap inside a warpgroup, gained
//   nothing at long sequences (d128 S 16k 700 with / 709 without, causal 689 / 699; d64 443 /
//   460), so it is off in the table's kernels; at short ones it gains (d128 S 512 +9%, session
//   9), which d128's pingpong sibling serves (fwd_kernels.h, fwd_plan.cc: up to 4096 keys).
inline constexpr FwdTileShape kFwdTiles[kFwdTileCount] = {
    /* d64  */ {"d64", 64, 192, 128, 2, 3, false},    // 114 KB smem (O apart)
    /* d128 */ {"d128", 128, 128, 128, 2, 2, false},  // 193 KB (O apart)
    /* d256 */ {"d256", 256, 128, 64, 2, 2, false},   // 193 KB (O in Q's buffer)
    // d_qk 192, d_v 128: 128 x 128 would need 209 KB with O in Q's buffer and leave no room for
    // the score-mod kernel's bias ring; 128 x 64 fits every kernel with O apart (161 KB plain,
    // 193 KB score-mod).
    /* d192_128 */ {"d192x128", 192, 128, 64, 2, 2, false, 128},
};

inline constexpr const FwdTileShape& fwd_tile_shape(FwdTile t) {
  return kFwdTiles[static_cast<int>(t)];
}

// The tile that serves (d_qk, d_v), or false: d_qk = d_v = 64, 128 or 256, or 192 / 128.
inline constexpr bool fwd_tile_for(long long d_qk, long long d_v, FwdTile* tile) {
  for (int i = 0; i < kFwdTileCount; ++i) {
    if (kFwdTiles[i].d == d_qk && kFwdTiles[i].d_v() == d_v) {
      *tile = static_cast<FwdTile>(i);
      return true;
    }
  }
  return false;
}

}  // namespace floe::detail::sm90
