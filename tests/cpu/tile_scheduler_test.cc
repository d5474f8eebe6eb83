// kernels/tile_scheduler.cuh on the host: each scheduler (query, bias and key tiles) hands every
// CTA of its grid exactly one tile, and the tile is the one the runtime division it replaced gave
// (tile fastest, then head, then batch; the forward's heavy-last order reversed within a head).
// Grids from one CTA to shapes whose grid nears 2^31, and random ones between.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "kernels/tile_scheduler.cuh"

namespace floe {
namespace {

using kernels::KeyTileScheduler;
using kernels::QueryTileScheduler;

// Every linear index when the grid is small; else the edges and random ones.
template <class F>
void for_indices(int64_t grid, std::mt19937_64& rng, F&& f) {
  if (grid <= 4096) {
    for (int64_t i = 0; i < grid; ++i) f(static_cast<uint32_t>(i));
    return;
  }
  for (int64_t i : {int64_t{0}, int64_t{1}, grid / 2, grid - 2, grid - 1}) {
    f(static_cast<uint32_t>(i));
  }
  for (int k = 0; k < 2000; ++k) f(static_cast<uint32_t>(rng() % static_cast<uint64_t>(grid)));
}

struct Dims {
  int64_t tiles, heads, batch;
};

std::vector<Dims> shapes(std::mt19937_64& rng) {
  std::vector<Dims> out = {{1, 1, 1},          {1, 7, 3},         {5, 1, 2},
                           {3, 5, 7},          {128, 32, 4},      {16384, 128, 1023},
                           {1, 1, 0x7fffffff}, {0x7fffffff, 1, 1}};
  for (int i = 0; i < 200; ++i) {
    const int64_t t = 1 + rng() % 3000, h = 1 + rng() % 200;
    const int64_t b = 1 + rng() % std::max<int64_t>(1, 0x7fffffff / (t * h));
    out.push_back({t, h, b});
  }
  return out;
}

TEST(TileScheduler, QueryTilesMatchTheDivisionTheyReplace) {
  std::mt19937_64 rng(11);
  for (const Dims& d : shapes(rng)) {
    for (bool heavy_last : {false, true}) {
      const QueryTileScheduler::Params p = QueryTileScheduler::make(d.tiles, d.heads, heavy_last);
      const int64_t grid = QueryTileScheduler::grid(p, d.batch);
      ASSERT_EQ(grid, d.tiles * d.heads * d.batch);
      EXPECT_EQ(QueryTileScheduler::workspace_bytes(p), 0u);
      std::set<std::tuple<int, int, int>> seen;
      for_indices(grid, rng, [&](uint32_t i) {
        const kernels::QueryTile t = QueryTileScheduler::tile(p, i);
        const int64_t m = i % d.tiles;
        ASSERT_EQ(t.m_block, heavy_last ? d.tiles - 1 - m : m) << "linear " << i;
        ASSERT_EQ(t.h, (i / d.tiles) % d.heads) << "linear " << i;
        ASSERT_EQ(t.b, i / d.tiles / d.heads) << "linear " << i;
        if (grid <= 4096) {
          EXPECT_TRUE(seen.insert({t.m_block, t.h, t.b}).second) << "linear " << i;
        }
      });
    }
  }
}

// The persistent scheduler: the CTAs of any grid together walk every tile exactly once (CTA c
// takes positions c, c + grid, ..., or grid - 1 - c in odd passes with snake); without lpt the list
// is QueryTileScheduler's; with lpt (only where heavy_last_m) the query tiles come highest first
// over all heads and batches, or within each section of heads, the sections in order.
TEST(TileScheduler, PersistentWalksEveryTileOnceInItsOrder) {
  using kernels::PersistentTileScheduler;
  std::mt19937_64 rng(17);
  for (const Dims& d : shapes(rng)) {
    if (d.tiles * d.heads * d.batch > 20000) continue;
    for (bool heavy_last : {false, true}) {
      for (int variant = 0; variant < 12; ++variant) {
        const bool lpt = variant & 1, snake = variant & 2;
        const int64_t section = std::vector<int64_t>{0, 1, 3}[variant / 4];
        const PersistentTileScheduler::Params p = PersistentTileScheduler::make(
            d.tiles, d.heads, d.batch, heavy_last, lpt, snake, section);
        const int64_t n = d.tiles * d.heads * d.batch;
        ASSERT_EQ(int64_t{p.tiles}, n);
        EXPECT_EQ(PersistentTileScheduler::workspace_bytes(p), 0u);
        EXPECT_EQ(PersistentTileScheduler::grid(p, 0), n);
        const QueryTileScheduler::Params one =
            QueryTileScheduler::make(d.tiles, d.heads, heavy_last);
        for (int64_t ctas : {int64_t{1}, int64_t{3}, int64_t{132}, n + 5}) {
          const int64_t grid = PersistentTileScheduler::grid(p, ctas);
          ASSERT_EQ(grid, std::min(ctas, n));
          std::set<std::tuple<int, int, int>> seen;
          for (int64_t c = 0; c < grid; ++c) {
            for (uint32_t k = 0;; ++k) {
              const int64_t i = PersistentTileScheduler::position(p, static_cast<uint32_t>(c),
                                                                  static_cast<uint32_t>(grid), k);
              if (i >= n) break;
              ASSERT_EQ(i, k * grid + (snake && (k & 1) ? grid - 1 - c : c));
              const kernels::QueryTile t =
                  PersistentTileScheduler::tile(p, static_cast<uint32_t>(i));
              ASSERT_TRUE(t.m_block >= 0 && t.m_block < d.tiles && t.h >= 0 && t.h < d.heads &&
                          t.b >= 0 && t.b < d.batch)
                  << "linear " << i;
              EXPECT_TRUE(seen.insert({t.m_block, t.h, t.b}).second) << "linear " << i;
              if (!(lpt && heavy_last)) {
                const kernels::QueryTile q =
                    QueryTileScheduler::tile(one, static_cast<uint32_t>(i));
                ASSERT_TRUE(q.m_block == t.m_block && q.h == t.h && q.b == t.b) << "linear " << i;
              }
            }
          }
          EXPECT_EQ(static_cast<int64_t>(seen.size()), n);
          if (lpt && heavy_last) {
            // Longest first within each section of `section` (head, batch) pairs, the sections
            // in order.
            const int64_t pairs = d.heads * d.batch;
            const int64_t sec = section > 0 && section < pairs ? section : pairs;
            int prev_m = INT32_MAX;
            int64_t prev_section = 0;
            for (int64_t i = 0; i < n; ++i) {
              const kernels::QueryTile t =
                  PersistentTileScheduler::tile(p, static_cast<uint32_t>(i));
              const int64_t s = (t.b * d.heads + t.h) / sec;
              ASSERT_EQ(s, i / (sec * d.tiles)) << "linear " << i << ": section";
              if (s != prev_section) prev_m = INT32_MAX;
              ASSERT_LE(t.m_block, prev_m) << "linear " << i << ": not longest first";
              prev_m = t.m_block;
              prev_section = s;
            }
          }
        }
      }
    }
  }
}

TEST(TileScheduler, KeyTilesMatchTheDivisionTheyReplace) {
  std::mt19937_64 rng(17);
  for (const Dims& d : shapes(rng)) {
    const KeyTileScheduler::Params p = KeyTileScheduler::make(d.tiles, d.heads);
    const int64_t grid = KeyTileScheduler::grid(p, d.batch);
    ASSERT_EQ(grid, d.tiles * d.heads * d.batch);
    EXPECT_EQ(KeyTileScheduler::workspace_bytes(p), 0u);
    std::set<std::tuple<int, int, int>> seen;
    for_indices(grid, rng, [&](uint32_t i) {
      const kernels::KeyTile t = KeyTileScheduler::tile(p, i);
      ASSERT_EQ(t.n_block, i % d.tiles) << "linear " << i;
      ASSERT_EQ(t.h_kv, (i / d.tiles) % d.heads) << "linear " << i;
      ASSERT_EQ(t.b, i / d.tiles / d.heads) << "linear " << i;
      if (grid <= 4096) EXPECT_TRUE(seen.insert({t.n_block, t.h_kv, t.b}).second) << "linear " << i;
    });
  }
}

// The deterministic sm90 backward's grid: sections of (kv head, batch) pairs, within a section
// the key tiles highest first and the pairs fastest, so that the CTAs a key tile waits on (the
// higher ones of its pair) have lower linear indices. Checked against the closed form of the
// position, for sections of one pair, of a few, and of all.
TEST(TileScheduler, DescendingKeyTilesRunEachPairsTilesHighestFirst) {
  std::mt19937_64 rng(71);
  for (const Dims& d : shapes(rng)) {
    const int64_t pairs = d.heads * d.batch;
    for (int64_t section : {int64_t{1}, int64_t{3}, int64_t{12}, pairs}) {
      SCOPED_TRACE("section " + std::to_string(section));
      const KeyTileScheduler::Params p = KeyTileScheduler::make(
          d.tiles, d.heads, kernels::KeyOrder::kDescending, d.batch, section);
      const int64_t grid = KeyTileScheduler::grid(p, d.batch);
      ASSERT_EQ(grid, d.tiles * pairs);
      const int64_t g = std::min(section, pairs);
      const int64_t last_sec = (pairs + g - 1) / g - 1;
      for_indices(grid, rng, [&](uint32_t i) {
        const kernels::KeyTile t = KeyTileScheduler::tile(p, i);
        ASSERT_GE(t.n_block, 0);
        ASSERT_LT(t.n_block, d.tiles);
        const int64_t pair = int64_t{t.b} * d.heads + t.h_kv;
        const int64_t sec = pair / g;
        const int64_t in_sec = sec == last_sec ? pairs - last_sec * g : g;
        const int64_t at =
            sec * g * d.tiles + (d.tiles - 1 - t.n_block) * in_sec + (pair - sec * g);
        ASSERT_EQ(at, int64_t{i}) << "tile " << t.n_block << " head " << t.h_kv << " batch " << t.b;
      });
    }
  }
}

// A summed dBias's grid: sections of the pairs that add into one accumulator tile (one head's
// batches, batch fastest, or one batch's heads), the key tiles ascending within a section and the
// pairs fastest, so that those pairs' CTAs of one key tile are dispatched together. Checked
// against the closed form of the position, and every (tile, head, batch) once.
TEST(TileScheduler, SiblingKeyTilesRunThePairsOfASumSideBySide) {
  std::mt19937_64 rng(83);
  for (const Dims& d : shapes(rng)) {
    for (bool batch_fastest : {false, true}) {
      SCOPED_TRACE(batch_fastest ? "batch fastest" : "head fastest");
      const int64_t pairs = d.heads * d.batch;
      const int64_t g = batch_fastest ? d.batch : d.heads;
      const KeyTileScheduler::Params p = KeyTileScheduler::make(
          d.tiles, d.heads, kernels::KeyOrder::kSiblings, d.batch, g, batch_fastest);
      const int64_t grid = KeyTileScheduler::grid(p, d.batch);
      ASSERT_EQ(grid, d.tiles * pairs);
      std::set<std::tuple<int, int, int>> seen;
      for_indices(grid, rng, [&](uint32_t i) {
        const kernels::KeyTile t = KeyTileScheduler::tile(p, i);
        ASSERT_GE(t.n_block, 0);
        ASSERT_LT(t.n_block, d.tiles);
        ASSERT_LT(t.h_kv, d.heads);
        ASSERT_LT(t.b, d.batch);
        const int64_t pair =
            batch_fastest ? int64_t{t.h_kv} * d.batch + t.b : int64_t{t.b} * d.heads + t.h_kv;
        const int64_t sec = pair / g;
        const int64_t at = sec * g * d.tiles + int64_t{t.n_block} * g + (pair - sec * g);
        ASSERT_EQ(at, int64_t{i}) << "tile " << t.n_block << " head " << t.h_kv << " batch " << t.b;
        if (grid <= 4096)
          EXPECT_TRUE(seen.insert({t.n_block, t.h_kv, t.b}).second) << "linear " << i;
      });
    }
  }
}

// The deterministic backward with a summed dBias: kDescending over kSiblings' sections (the
// plan's choice: a batch sum alone batch fastest in sections of the batch, else one batch's heads
// a section). Every CTA waits on the pair before it in the sum at its key tile and on the higher
// key tile of its own pair; both must have lower linear indices, so that waits only go to CTAs
// dispatched earlier; and the pairs of a sum's section are side by side at each key tile.
// Checked from the inverse map, for sums over the batch, the heads and both.
TEST(TileScheduler, DescendingSiblingsDispatchEveryTurnBeforeItsWaiter) {
  std::mt19937_64 rng(89);
  std::vector<Dims> dims = shapes(rng);  // most of them past the 2^20 CTAs checked here
  for (int i = 0; i < 100; ++i) {
    dims.push_back({int64_t(1 + rng() % 40), int64_t(1 + rng() % 9), int64_t(1 + rng() % 9)});
  }
  for (const Dims& d : dims) {
    for (int sum = 0; sum < 3; ++sum) {  // 0: over the batch, 1: over the heads, 2: both
      SCOPED_TRACE("sum " + std::to_string(sum));
      const bool batch_fastest = sum == 0;
      const int64_t g = batch_fastest ? d.batch : d.heads;
      const KeyTileScheduler::Params p = KeyTileScheduler::make(
          d.tiles, d.heads, kernels::KeyOrder::kDescending, d.batch, g, batch_fastest);
      const int64_t grid = KeyTileScheduler::grid(p, d.batch);
      ASSERT_EQ(grid, d.tiles * d.heads * d.batch);
      if (grid > (int64_t{1} << 20)) continue;
      std::vector<int64_t> at(static_cast<size_t>(grid), -1);
      auto key = [&](int64_t n, int64_t h, int64_t b) { return (b * d.heads + h) * d.tiles + n; };
      for (int64_t i = 0; i < grid; ++i) {
        const kernels::KeyTile t = KeyTileScheduler::tile(p, static_cast<uint32_t>(i));
        ASSERT_LT(t.n_block, d.tiles);
        ASSERT_LT(t.h_kv, d.heads);
        ASSERT_LT(t.b, d.batch);
        int64_t& slot = at[static_cast<size_t>(key(t.n_block, t.h_kv, t.b))];
        ASSERT_EQ(slot, -1) << "linear " << i << " repeats a tile";
        slot = i;
      }
      for (int64_t b = 0; b < d.batch; ++b) {
        for (int64_t h = 0; h < d.heads; ++h) {
          for (int64_t n = 0; n < d.tiles; ++n) {
            const int64_t me = at[static_cast<size_t>(key(n, h, b))];
            if (n + 1 < d.tiles) ASSERT_LT(at[static_cast<size_t>(key(n + 1, h, b))], me);
            // The pairs of one sum's section side by side (their reductions meet in L2).
            if (sum == 0) ASSERT_EQ(me, at[static_cast<size_t>(key(n, h, 0))] + b);
            if (sum == 1) ASSERT_EQ(me, at[static_cast<size_t>(key(n, 0, b))] + h);
            // The pair before in the sum's order (b * heads + h over the summed dims).
            int64_t pb = b, ph = h;
            if (sum == 0) {
              pb = b - 1;
            } else if (sum == 1) {
              ph = h - 1;
            } else if (h > 0) {
              ph = h - 1;
            } else {
              pb = b - 1;
              ph = d.heads - 1;
            }
            if (pb >= 0 && ph >= 0) {
              ASSERT_LT(at[static_cast<size_t>(key(n, ph, pb))], me)
                  << "tile " << n << " head " << h << " batch " << b;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace floe
