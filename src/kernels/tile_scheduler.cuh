// Which tile a CTA of a one-dimensional grid computes. A scheduler is a small object in two
// halves: a host side, Params (built once at plan time, copied into the kernel's params) with the
// grid it needs and the workspace it needs (none for these; a persistent scheduler's tile counter
// would be a chunk, reset by the execute that uses it), and a device side, tile(params, linear).
// The forward and the backward's preprocess and dQ epilogue kernels decode blockIdx
// through one of these, with FastDivisor (a multiply-high and a shift) instead of a division by
// a runtime value.
//
// The tile varies fastest, so the CTAs resident at one time share a few heads and re-read the
// same K and V (or Q and dO) from L2, and GQA heads of one kv head sit side by side. When later
// query tiles see more keys (a band bounded on the right only, e.g. causal), the forward hands
// out the tiles of a head last-first: the long CTAs start in the first wave and the short ones
// fill the tail.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/host_device.h"
#include "kernels/fast_divisor.h"

namespace floe::kernels {

// A plan-time count (below 2^31: the planner bounds every grid) as a divisor.
inline FastDivisor divisor_of(int64_t n) {
  return FastDivisor(static_cast<uint32_t>(n));
}

// Host: a walk over `pairs` (head, batch) pairs of `blocks` tiles each, in sections of
// `section_pairs` pairs (<= 0 or more than there are: one section), the last section the rest:
// the divisors its device side decodes a position with, written into a scheduler's Params
// (section_tiles, section, last, last_section: the persistent and the key-tile schedulers').
template <class Params>
inline void set_pair_sections(Params& p, int64_t pairs, int64_t blocks, int64_t section_pairs) {
  const int64_t sec = section_pairs > 0 && section_pairs < pairs ? section_pairs : pairs;
  const int64_t sections = (pairs + sec - 1) / sec;
  p.section_tiles = divisor_of(sec * blocks);
  p.section = divisor_of(sec);
  p.last = divisor_of(pairs - (sections - 1) * sec);
  p.last_section = static_cast<uint32_t>(sections - 1);
}

// linear -> (tile, head, batch), tile fastest.
struct TileHeadBatch {
  uint32_t tile, h, b;
};
FLOE_HD TileHeadBatch decode_tile_head_batch(uint32_t linear, const FastDivisor& tiles,
                                             const FastDivisor& heads) {
  const uint32_t hb = tiles.div(linear);
  const uint32_t b = heads.div(hb);
  return TileHeadBatch{linear - hb * tiles.d, hb - b * heads.d, b};
}

struct QueryTile {
  int m_block;  // query tile index within the sequence
  int h;        // query head
  int b;        // batch
};

// (query tile, query head, batch) CTAs: the forward, and the backward's preprocess and dQ
// epilogue.
struct QueryTileScheduler {
  struct Params {
    bool heavy_last_m = false;  // true: high query tiles see more keys, schedule them first
    FastDivisor m_blocks, h_q;  // by the query tile count ceil(s_q / block_m), by Hq
  };
  static Params make(int64_t m_blocks, int64_t h_q, bool heavy_last_m) {
    return Params{heavy_last_m, divisor_of(m_blocks), divisor_of(h_q)};
  }
  // CTAs of the grid (the planner bounds it below 2^31), and the workspace the scheduler needs.
  static int64_t grid(const Params& p, int64_t b) { return int64_t{p.m_blocks.d} * p.h_q.d * b; }
  static size_t workspace_bytes(const Params&) { return 0; }

  FLOE_HD static QueryTile tile(const Params& p, uint32_t linear) {
    const TileHeadBatch t = decode_tile_head_batch(linear, p.m_blocks, p.h_q);
    QueryTile q;
    q.m_block =
        p.heavy_last_m ? static_cast<int>(p.m_blocks.d - 1 - t.tile) : static_cast<int>(t.tile);
    q.h = static_cast<int>(t.h);
    q.b = static_cast<int>(t.b);
    return q;
  }
};

// Persistent (query tile, query head, batch) scheduling: a grid of at most `ctas` CTAs (the SM
// count: one resident CTA each), each walking a list of the tiles from position blockIdx.x in
// steps of gridDim.x, so that a CTA pays its prologue once and its next tile's loads run under
// its previous tile's epilogue. A static order, no workspace: a CTA's tiles follow from its index.
// With a grid of one CTA per tile it is QueryTileScheduler's grid.
//
// The list: QueryTileScheduler's order (tile fastest, so the tiles in flight at one time share
// heads and their K and V in L2; with heavy_last_m a head's tiles last-first), or with lpt
// longest first over all heads: the query tile is the slowest index, highest first, heads and
// batches fastest (optionally within sections of heads, one section after the other). LPT only
// matters where later query tiles see more keys (heavy_last_m), and a static LPT order balances
// only as well as a CTA's share of each weight is even; the one-tile- per-CTA grid, whose CTAs the
// hardware hands out as SMs free up, is its yardstick.
struct PersistentTileScheduler {
  struct Params {
    QueryTileScheduler::Params list;  // the decode without lpt (and the divisors by tiles, Hq)
    // The lpt decode: sections of `section` (head, batch) pairs (the last one `last` pairs),
    // section_tiles = section * query tiles apart.
    FastDivisor section_tiles, section, last;
    uint32_t last_section = 0;
    uint32_t tiles = 0;  // query tiles of all heads and batches (below 2^31)
    bool lpt = false;
    bool snake = false;  // every other pass over the list runs the CTAs in reverse
  };
  // section_pairs (lpt only): (head, batch) pairs per section, <= 0 or more than there are: one
  // section. Within a section the list runs longest first; the sections follow each other, so
  // that the K and V read by the CTAs in flight are those of one section's heads (L2).
  static Params make(int64_t m_blocks, int64_t h_q, int64_t b, bool heavy_last_m, bool lpt,
                     bool snake = false, int64_t section_pairs = 0) {
    Params p;
    p.lpt = lpt && heavy_last_m;
    p.snake = snake;
    p.list = QueryTileScheduler::make(m_blocks, h_q, heavy_last_m && !p.lpt);
    const int64_t pairs = h_q * b;
    set_pair_sections(p, pairs, m_blocks, section_pairs);
    p.tiles = static_cast<uint32_t>(m_blocks * pairs);
    return p;
  }
  // CTAs of the grid: `ctas` (<= 0: one per tile), never more than the tiles.
  static int64_t grid(const Params& p, int64_t ctas) {
    return ctas > 0 && ctas < int64_t{p.tiles} ? ctas : int64_t{p.tiles};
  }
  static size_t workspace_bytes(const Params&) { return 0; }

  // The position in the list of CTA `cta`'s k-th tile (>= tiles: it has no more): cta + k * grid,
  // or with snake grid - 1 - cta + k * grid in odd passes, so that over two passes of a list
  // sorted by weight each CTA's share is about even (a static LPT order otherwise gives CTA 0
  // the heaviest tile of every pass).
  FLOE_HD static uint32_t position(const Params& p, uint32_t cta, uint32_t grid, uint32_t k) {
    return k * grid + (p.snake && (k & 1) != 0 ? grid - 1 - cta : cta);
  }

  // The tile at position `linear` of the list (linear < tiles).
  FLOE_HD static QueryTile tile(const Params& p, uint32_t linear) {
    if (!p.lpt) return QueryTileScheduler::tile(p.list, linear);
    const uint32_t sec = p.section_tiles.div(linear);
    const uint32_t in = linear - sec * p.section_tiles.d;
    const FastDivisor pairs = sec == p.last_section ? p.last : p.section;
    const uint32_t from_top = pairs.div(in);
    const uint32_t hb = sec * p.section.d + (in - from_top * pairs.d);
    const uint32_t b = p.list.h_q.div(hb);
    QueryTile q;
    q.m_block = static_cast<int>(p.list.m_blocks.d - 1 - from_top);
    q.h = static_cast<int>(hb - b * p.list.h_q.d);
    q.b = static_cast<int>(b);
    return q;
  }
};

struct KeyTile {
  int n_block;  // key tile index within the sequence
  int h_kv;     // key/value head
  int b;        // batch
};

// (key tile, kv head, batch) CTAs: the key/value-stationary backward kernels, each CTA visiting
// the query tiles that see its keys. Three orders:
//
// kTileFastest (the default): key tile fastest, then kv head, then batch.
//
// kDescending (the deterministic backward, whose CTAs wait on the higher key tiles of their own
// (kv head, batch) pair, so those must have lower linear indices): the pairs go in sections of
// `section` pairs, one section after the other; within a section the key tile is the slow index,
// highest first, and the pairs of the section the fast one. A section of one pair is the plain
// order reversed. Wider sections spread each pair's chain of waits over several waves of CTAs (its
// key tiles are not all dispatched at once), at the price of the Q and dO of more heads in L2.
// With a deterministic summed dBias the sections are kSiblings' (below), so that the pairs before
// in the sum, which a pair waits on at each of its tiles, go out before it too.
//
// kSiblings (a dBias summed over a broadcast dim, whose tile (query tile, key tile) every pair of
// the sum adds into): sections as kDescending's, the key tile ascending, so that the CTAs adding
// into one accumulator tile run at once and visit the query tiles in step: their reductions meet
// in L2 instead of reading and writing the fp32 accumulator in HBM once a pair. The pairs of a
// section are those of the sum: with batch_fastest (a sum over the batch) the pair index is
// head * b + batch, else batch * h_kv + head (either sectioned order).
enum class KeyOrder : uint8_t { kTileFastest, kDescending, kSiblings };

struct KeyTileScheduler {
  struct Params {
    FastDivisor n_blocks, h_kv, b;  // by the key tile count ceil(s_kv / block_n), by Hkv, by B
    KeyOrder order = KeyOrder::kTileFastest;
    bool batch_fastest = false;  // sectioned orders: pairs ordered (kv head, batch), batch fastest
    // Sectioned orders: the sections of (kv head, batch) pairs, section * n_blocks CTAs apart; the
    // last one has `last` pairs.
    FastDivisor section_tiles, section, last;
    uint32_t last_section = 0;
  };
  // section_pairs (sectioned orders): pairs per section, <= 0 or more than there are: one section.
  static Params make(int64_t n_blocks, int64_t h_kv, KeyOrder order = KeyOrder::kTileFastest,
                     int64_t b = 1, int64_t section_pairs = 1, bool batch_fastest = false) {
    Params p;
    p.n_blocks = divisor_of(n_blocks);
    p.h_kv = divisor_of(h_kv);
    p.b = divisor_of(b);
    p.order = order;
    p.batch_fastest = batch_fastest && order != KeyOrder::kTileFastest;
    set_pair_sections(p, h_kv * b, n_blocks, section_pairs);
    return p;
  }
  static int64_t grid(const Params& p, int64_t b) { return int64_t{p.n_blocks.d} * p.h_kv.d * b; }
  static size_t workspace_bytes(const Params&) { return 0; }

  FLOE_HD static KeyTile tile(const Params& p, uint32_t linear) {
    if (p.order == KeyOrder::kTileFastest) {
      const TileHeadBatch t = decode_tile_head_batch(linear, p.n_blocks, p.h_kv);
      return KeyTile{static_cast<int>(t.tile), static_cast<int>(t.h), static_cast<int>(t.b)};
    }
    const uint32_t sec = p.section_tiles.div(linear);
    const uint32_t in = linear - sec * p.section_tiles.d;
    const FastDivisor pairs = sec == p.last_section ? p.last : p.section;
    const uint32_t step = pairs.div(in);
    const uint32_t pair = sec * p.section.d + (in - step * pairs.d);
    const int n_block =
        static_cast<int>(p.order == KeyOrder::kDescending ? p.n_blocks.d - 1 - step : step);
    if (p.batch_fastest) {
      const uint32_t h = p.b.div(pair);
      return KeyTile{n_block, static_cast<int>(h), static_cast<int>(pair - h * p.b.d)};
    }
    const uint32_t b = p.h_kv.div(pair);
    return KeyTile{n_block, static_cast<int>(pair - b * p.h_kv.d), static_cast<int>(b)};
  }
};

}  // namespace floe::kernels
