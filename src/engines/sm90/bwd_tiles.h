// sm90 backward: the tiles (host and device read the same table): 128 keys per CTA (two consumer
// warpgroups of 64 keys), 80 (d128) or 128 (d64) queries per visit, a 2-stage Q / dO ring; d256
// 64 keys shared by both warpgroups (wide).
#pragma once

namespace floe::detail::sm90 {

enum class BwdTile { d64, d128, d192_128, d128_m64, d256 };
inline constexpr int kBwdTileCount = 5;

struct BwdTileShape {
  const char* name;
  int d, block_m, block_n, stages;
  bool dq_before_dk;  // issue order dV, dQ, dK (bwd_traits.cuh kDqBeforeDk)
  int dv = 0;         // d_v where it differs from d (0: d_v = d)
  // dQ issued while dV and dK are in flight (bwd_traits.cuh kOverlapDq); off where the registers
  // of P and dS beside dQ's accumulator would not fit.
  bool overlap_dq = true;
  // Both consumer warpgroups on the same 64 keys, d split between them (bwd_wide_kernel.cuh):
  // dK and dV of 64 keys x d would not fit one warpgroup's registers.
  bool wide = false;
  // The bias kernel (a bias tile a Q/dO stage, bwd_bias.cuh) fits beside the tile's shared
  // memory: d64 224 KB, d128m64 208 KB, d192x128 212 KB (bwd_traits.cuh's static_assert holds
  // it). d128's 80 rows would need 244 KB, so a bias takes d128m64; d256 (225 KB) has no room.
  bool bias = false;

  constexpr int d_v() const { return dv != 0 ? dv : d; }
};

// d128: 80-row query tiles (dQ computed transposed) with dQ issued before dK. H200, bf16, S 16k,
// in one call through the library (floe bench): 564 TFLOP/s against 527 for 64-row tiles with the
// order dV, dK, dQ; the dev harness: 64 rows 537 / dQ first 570, 80 rows 546 / dQ first 578.
// d64: 128-row query tiles (FA3's d64 tile; dQ split along the queries between the warpgroups),
// dQ issued first. 64-row tiles gave 400 (order dV, dK, dQ) and 418 (dQ first) at S 16k through
// the library; a visit of 64 x 64 per warpgroup was too short for its fixed cost (barriers, stats,
// the dQ hand-off) and its N = 64 products.
// d192x128 (Dv not padded to 192): dK and dV hold 160 of the 240 registers a consumer thread, so
// the query tiles are 48 rows (64: 508 bytes of spill at ptxas, and serialised GMMAs), dQ waits
// for dV (kOverlapDq off; on, ptxas serialises the GMMAs) and is computed in thirds (bwd_traits.cuh
// kDqThirds). H200, bf16, Hq 16: S 4096 477, S 16k causal 497 TFLOP/s (sm80 213 / 224); a 3-stage
// ring measured 2-5% faster, not yet battery-tested.
// d128m64: d128 on 64-row query tiles (dQ split along d, dV dQ dK), an alternative for bands with
// a right bound (causal), whose short query ranges the 80-row tile pads: at S 512 the key tiles of
// a causal head visit 1600 query rows for the 1280 there are, against 1280 on 64 rows. Measured
// before 80 rows replaced it (H200, bf16, BACKWARD.md): causal S 512 164 TFLOP/s (64 rows, order
// dV dK dQ) against 153 (80 rows, dQ first); S 16k causal in the dev harness 569 (64 rows, dV dQ
// dK, this tile's order) against 572 (80 rows). FlashAttention 4 picks 64 rows for
// causal and local d128. Chosen by key count and mask as timed through the library (bwd_plan.cc's
// d128_tile); after d128 in the table, so that bwd_tile_for finds d128.
// d256 (wide): 64 keys a CTA, 64-query visits, P^T and dS^T through shared memory (two buffers),
// dQ by vector reductions from registers: K, V 32 KB each, Q and dO 2 x 32 KB each, P^T and dS^T
// 2 x 8 KB each, 225 KB in all (bwd_wide_traits.cuh).
inline constexpr BwdTileShape kBwdTileShapes[kBwdTileCount] = {
    {"d64", 64, 128, 128, 2, true, 0, true, false, true},
    {"d128", 128, 80, 128, 2, true},
    {"d192x128", 192, 48, 128, 2, true, 128, false, false, true},
    {"d128m64", 128, 64, 128, 2, true, 0, true, false, true},
    {"d256", 256, 64, 64, 2, false, 0, false, true}};

inline constexpr const BwdTileShape& bwd_tile_shape(BwdTile t) {
  return kBwdTileShapes[static_cast<int>(t)];
}

// The tile that serves (d_qk, d_v), or false: d_qk = d_v = 64, 128 or 256, or 192 / 128 (d128m64
// only when asked for: bwd_plan.cc).
inline constexpr bool bwd_tile_for(long long d_qk, long long d_v, BwdTile* tile) {
  for (int i = 0; i < kBwdTileCount; ++i) {
    if (kBwdTileShapes[i].d == d_qk && kBwdTileShapes[i].d_v() == d_v) {
      *tile = static_cast<BwdTile>(i);
      return true;
    }
  }
  return false;
}

}  // namespace floe::detail::sm90
