// sm90 backward: the tiles (host and device read the same table). One shape for now: 64 queries
// per visit, 128 keys per CTA (two consumer warpgroups of 64 keys), a 2-stage Q / dO ring.
#pragma once

namespace floe::detail::sm90 {

enum class BwdTile { d64, d128 };
inline constexpr int kBwdTileCount = 2;

struct BwdTileShape {
  const char* name;
  int d, block_m, block_n, stages;
  bool dq_before_dk;  // issue order dV, dQ, dK (bwd_traits.cuh kDqBeforeDk)
};

inline constexpr BwdTileShape kBwdTileShapes[kBwdTileCount] = {{"d64", 64, 64, 128, 2, false},
                                                               {"d128", 128, 64, 128, 2, false}};

inline constexpr const BwdTileShape& bwd_tile_shape(BwdTile t) {
  return kBwdTileShapes[static_cast<int>(t)];
}

inline constexpr const char* kBwdKernelNames[kBwdTileCount][2] = {
    {"sm90_bwd_d64_f16", "sm90_bwd_d64_bf16"}, {"sm90_bwd_d128_f16", "sm90_bwd_d128_bf16"}};

// The tile that serves (d_qk, d_v), or false: equal head dims of 64 or 128 only for now.
inline constexpr bool bwd_tile_for(long long d_qk, long long d_v, BwdTile* tile) {
  if (d_qk != d_v) return false;
  for (int i = 0; i < kBwdTileCount; ++i) {
    if (kBwdTileShapes[i].d == d_qk) {
      *tile = static_cast<BwdTile>(i);
      return true;
    }
  }
  return false;
}

}  // namespace floe::detail::sm90
