// kernels/tile_scheduler.cuh on the host: each scheduler (query, bias and key tiles) hands every
// CTA of its grid exactly one tile, and the tile is the one the runtime division it replaced gave
// (tile fastest, then head, then batch; the forward's heavy-last order reversed within a head).
// Grids from one CTA to shapes whose grid nears 2^31, and random ones between.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "kernels/tile_scheduler.cuh"

namespace floe {
namespace {

using kernels::BiasTileScheduler;
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

TEST(TileScheduler, BiasTilesMatchTheDivisionTheyReplace) {
  std::mt19937_64 rng(13);
  for (const Dims& d : shapes(rng)) {
    const int64_t n_tiles = 1 + rng() % 50;
    if (d.tiles * d.heads * n_tiles > 0x7fffffff) continue;
    const int64_t bias_b =
        1 + rng() % std::max<int64_t>(1, 0x7fffffff / (d.tiles * d.heads * n_tiles));
    const BiasTileScheduler::Params p = BiasTileScheduler::make(d.tiles, n_tiles, d.heads);
    const int64_t grid = BiasTileScheduler::grid(p, bias_b);
    ASSERT_EQ(grid, d.tiles * n_tiles * d.heads * bias_b);
    for_indices(grid, rng, [&](uint32_t i) {
      const kernels::BiasTile t = BiasTileScheduler::tile(p, i);
      uint32_t rest = i;
      ASSERT_EQ(t.m_block, rest % d.tiles) << "linear " << i;
      rest /= d.tiles;
      ASSERT_EQ(t.n_block, rest % n_tiles) << "linear " << i;
      rest /= n_tiles;
      ASSERT_EQ(t.h, rest % d.heads) << "linear " << i;
      ASSERT_EQ(t.b, rest / d.heads) << "linear " << i;
    });
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

}  // namespace
}  // namespace floe
