// sm80: the compiled head-dim tiles, the same four in both directions (each direction gives them
// its own shapes: fwd_tiles.h, bwd_tiles.h). Plain constexpr, read by the planner (host, no
// CUDA) and by the kernels' traits.
#pragma once

namespace floe::detail::sm80 {

enum class HeadDimTile : int { d64 = 0, d128 = 1, d192_128 = 2, d256 = 3 };
inline constexpr int kHeadDimTileCount = 4;

inline constexpr const char* head_dim_tile_name(HeadDimTile t) {
  switch (t) {
    case HeadDimTile::d64:
      return "d64";
    case HeadDimTile::d128:
      return "d128";
    case HeadDimTile::d192_128:
      return "d192x128";
    case HeadDimTile::d256:
      return "d256";
  }
  return "?";
}

// The smallest compiled tile that holds both head dims (each a multiple of 8 and at most 256,
// which check_head_dims has made sure of).
inline constexpr HeadDimTile head_dim_tile_for(long long d_qk, long long d_v) {
  if (d_qk <= 64 && d_v <= 64) return HeadDimTile::d64;
  if (d_qk <= 128 && d_v <= 128) return HeadDimTile::d128;
  if (d_qk <= 192 && d_v <= 128) return HeadDimTile::d192_128;
  return HeadDimTile::d256;
}

// The instantiations' names in messages, "sm80_<fwd|bwd>_<tile>_<dtype>_<plain|scoremod>", by
// [backward][tile][{f16, bf16} x {plain, score-mod}].
inline constexpr const char* kKernelNames[2][kHeadDimTileCount][4] = {
    {{"sm80_fwd_d64_f16_plain", "sm80_fwd_d64_f16_scoremod", "sm80_fwd_d64_bf16_plain",
      "sm80_fwd_d64_bf16_scoremod"},
     {"sm80_fwd_d128_f16_plain", "sm80_fwd_d128_f16_scoremod", "sm80_fwd_d128_bf16_plain",
      "sm80_fwd_d128_bf16_scoremod"},
     {"sm80_fwd_d192x128_f16_plain", "sm80_fwd_d192x128_f16_scoremod",
      "sm80_fwd_d192x128_bf16_plain", "sm80_fwd_d192x128_bf16_scoremod"},
     {"sm80_fwd_d256_f16_plain", "sm80_fwd_d256_f16_scoremod", "sm80_fwd_d256_bf16_plain",
      "sm80_fwd_d256_bf16_scoremod"}},
    {{"sm80_bwd_d64_f16_plain", "sm80_bwd_d64_f16_scoremod", "sm80_bwd_d64_bf16_plain",
      "sm80_bwd_d64_bf16_scoremod"},
     {"sm80_bwd_d128_f16_plain", "sm80_bwd_d128_f16_scoremod", "sm80_bwd_d128_bf16_plain",
      "sm80_bwd_d128_bf16_scoremod"},
     {"sm80_bwd_d192x128_f16_plain", "sm80_bwd_d192x128_f16_scoremod",
      "sm80_bwd_d192x128_bf16_plain", "sm80_bwd_d192x128_bf16_scoremod"},
     {"sm80_bwd_d256_f16_plain", "sm80_bwd_d256_f16_scoremod", "sm80_bwd_d256_bf16_plain",
      "sm80_bwd_d256_bf16_scoremod"}}};

}  // namespace floe::detail::sm80
