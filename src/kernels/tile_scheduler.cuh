// Which query tile, head and batch a CTA of a one-dimensional grid computes.
//
// The query tile varies fastest, so the CTAs resident at one time share a few (kv) heads and
// re-read K and V from L2, and GQA heads of one kv head sit side by side. When later query tiles
// see more keys (a band bounded on the right only, e.g. causal), the tiles of a head are handed
// out last-first: the long CTAs start in the first wave and the short ones fill the tail.
#pragma once

#include <cstdint>

namespace floe::kernels {

struct QueryTile {
  int m_block;  // query tile index within the sequence
  int h;        // query head
  int b;        // batch
};

__device__ __forceinline__ QueryTile schedule_query_tile(uint32_t linear, int num_m_blocks, int h_q,
                                                         bool heavy_last_m) {
  const uint32_t m = linear % static_cast<uint32_t>(num_m_blocks);
  const uint32_t hb = linear / static_cast<uint32_t>(num_m_blocks);
  QueryTile t;
  t.m_block = heavy_last_m ? num_m_blocks - 1 - static_cast<int>(m) : static_cast<int>(m);
  t.h = static_cast<int>(hb % static_cast<uint32_t>(h_q));
  t.b = static_cast<int>(hb / static_cast<uint32_t>(h_q));
  return t;
}

}  // namespace floe::kernels
