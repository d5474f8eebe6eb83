// Which query tile, head and batch a CTA of a one-dimensional grid computes.
//
// The query tile varies fastest, so the CTAs resident at one time share a few (kv) heads and
// re-read K and V from L2, and GQA heads of one kv head sit side by side. When later query tiles
// see more keys (a band bounded on the right only, e.g. causal), the tiles of a head are handed
// out last-first: the long CTAs start in the first wave and the short ones fill the tail.
#pragma once

#include <cstdint>

#include "kernels/fast_divisor.h"

namespace floe::kernels {

struct QueryTile {
  int m_block;  // query tile index within the sequence
  int h;        // query head
  int b;        // batch
};

// linear < 2^31 (the planner bounds the grid); m_blocks and h_q divide by the tile count and the
// query head count.
__device__ __forceinline__ QueryTile schedule_query_tile(uint32_t linear,
                                                         const FastDivisor& m_blocks,
                                                         const FastDivisor& h_q,
                                                         bool heavy_last_m) {
  const uint32_t hb = m_blocks.div(linear);
  const uint32_t m = linear - hb * m_blocks.d;
  const uint32_t b = h_q.div(hb);
  QueryTile t;
  t.m_block = heavy_last_m ? static_cast<int>(m_blocks.d - 1 - m) : static_cast<int>(m);
  t.h = static_cast<int>(hb - b * h_q.d);
  t.b = static_cast<int>(b);
  return t;
}

}  // namespace floe::kernels
