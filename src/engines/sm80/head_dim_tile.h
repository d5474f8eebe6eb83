// sm80: the four head-dim classes a problem falls in, the same in both directions. Each direction
// compiles one or more tiles per class (fwd_tiles.h, bwd_tiles.h: the H200's tile first, then
// smaller ones for parts with less shared memory per block). Plain constexpr, read by the planner
// (host, no CUDA) and by the kernels' traits.
#pragma once

#include <cstddef>

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

// The smallest class that holds both head dims (each a multiple of 8 and at most 256,
// which check_head_dims has made sure of).
inline constexpr HeadDimTile head_dim_tile_for(long long d_qk, long long d_v) {
  if (d_qk <= 64 && d_v <= 64) return HeadDimTile::d64;
  if (d_qk <= 128 && d_v <= 128) return HeadDimTile::d128;
  if (d_qk <= 192 && d_v <= 128) return HeadDimTile::d192_128;
  return HeadDimTile::d256;
}

// Per class, a direction's tiles, preferred (fastest on the H200) first, smallest last; a class
// with fewer tiles repeats its last.
inline constexpr int kTilesPerClass = 3;

// The first of `tiles` whose shared memory fits `smem_limit` bytes (a Target's
// smem_per_block_optin); the smallest, the last, when none does (the planner then declines,
// naming what it needs).
template <class Tile, class SmemBytes>
constexpr Tile first_fitting(const Tile (&tiles)[kTilesPerClass], size_t smem_limit,
                             SmemBytes smem_bytes) {
  for (Tile t : tiles) {
    if (static_cast<size_t>(smem_bytes(t)) <= smem_limit) return t;
  }
  return tiles[kTilesPerClass - 1];
}

}  // namespace floe::detail::sm80
