// The tile ranges of kernels/band_tiles.cuh, checked exhaustively on small problems against the
// band's definition (DESIGN §2), on the host (the functions are host-device):
//  - key_tiles (forward, and the backward's dQ order) and query_tiles (backward) agree on which
//    (query tile, key tile) pairs meet: the deterministic backward orders its dQ additions by
//    key_tiles().begin, and a pair one side visits but the other does not count would hang it;
//  - key_tiles_above (sm90's deterministic dQ order, highest key tile first) gives the visitors
//    of a query tile the turns 0, 1, ... from the highest down: a turn no visitor takes, or two
//    visitors with one turn, would hang that order;
//  - every visible (query, key) pair lies in a visited tile pair;
//  - a tile that runs without the mask (forward: [full_begin, full_end); backward:
//    !needs_mask) holds only visible pairs.
// Masks: none, causal both alignments, windows of every sign, including bands of negative
// width that see nothing.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>

#include "kernels/band_tiles.cuh"

namespace floe {
namespace {

using kernels::BandMask;

struct Band {
  std::optional<int64_t> left, right;
  bool bottom_right = false;
};

BandMask band_mask(const Band& b) {
  BandMask m;
  m.has_left = b.left.has_value();
  m.has_right = b.right.has_value();
  m.left = b.left.value_or(0);
  m.right = b.right.value_or(0);
  m.bottom_right = b.bottom_right;
  return m;
}

bool visible(const Band& b, int64_t i, int64_t j, int64_t sq, int64_t skv) {
  if (i >= sq || j >= skv) return false;
  const int64_t off = b.bottom_right ? skv - sq : 0;
  if (b.left && j < i + off - *b.left) return false;
  if (b.right && j > i + off + *b.right) return false;
  return true;
}

std::string describe(const Band& b, int sq, int skv, int bm, int bn) {
  auto bound = [](const std::optional<int64_t>& x) { return x ? std::to_string(*x) : "-"; };
  return "left " + bound(b.left) + " right " + bound(b.right) +
         (b.bottom_right ? " bottom-right" : " top-left") + " sq " + std::to_string(sq) + " skv " +
         std::to_string(skv) + " block_m " + std::to_string(bm) + " block_n " + std::to_string(bn);
}

void check(const Band& band, int sq, int skv, int bm, int bn) {
  SCOPED_TRACE(describe(band, sq, skv, bm, bn));
  const BandMask mask = band_mask(band);
  const bool has_mask = band.left.has_value() || band.right.has_value();
  const int m_tiles = (sq + bm - 1) / bm;
  const int n_tiles = (skv + bn - 1) / bn;
  for (int m = 0; m < m_tiles; ++m) {
    const int m0 = m * bm;
    const kernels::KeyTiles kt =
        kernels::key_tiles(mask, has_mask, m0, std::min(m0 + bm, sq) - 1, sq, skv, bn);
    int above = 0;  // visitors of query tile m above key tile n, counted from the top
    for (int n = n_tiles - 1; n >= 0; --n) {
      const int n0 = n * bn;
      const kernels::QueryTiles qt =
          kernels::query_tiles(mask, has_mask, n0, std::min(n0 + bn, skv) - 1, sq, skv, bm);
      if (qt.empty() || m < qt.begin || m >= qt.end) continue;
      ASSERT_EQ(kernels::key_tiles_above(mask, has_mask, std::min(m0 + bm, sq) - 1, n, sq, skv, bn),
                above)
          << "turn of key tile " << n << " at query tile " << m;
      ++above;
    }
    for (int n = 0; n < n_tiles; ++n) {
      const int n0 = n * bn;
      const kernels::QueryTiles qt =
          kernels::query_tiles(mask, has_mask, n0, std::min(n0 + bn, skv) - 1, sq, skv, bm);
      const bool fwd_visits = !kt.empty() && n >= kt.begin && n < kt.end;
      const bool bwd_visits = !qt.empty() && m >= qt.begin && m < qt.end;
      ASSERT_EQ(fwd_visits, bwd_visits) << "tiles m " << m << " n " << n;
      bool any = false, all = true;
      for (int i = m0; i < std::min(m0 + bm, sq); ++i) {
        for (int j = n0; j < n0 + bn; ++j) {
          const bool v = visible(band, i, j, sq, skv);
          any |= v;
          all &= v;
        }
      }
      if (any) ASSERT_TRUE(fwd_visits) << "a visible pair in unvisited tiles m " << m << " n " << n;
      if (fwd_visits && !kt.needs_mask(n)) {
        ASSERT_TRUE(all) << "forward runs tiles m " << m << " n " << n << " unmasked";
      }
      if (bwd_visits && !qt.needs_mask(m0, bm, n0, bn, skv)) {
        ASSERT_TRUE(all) << "backward runs tiles m " << m << " n " << n << " unmasked";
      }
    }
  }
}

TEST(BandTiles, BothSidesAgreeCoverEveryVisiblePairAndSkipTheMaskOnlyWhereAllIsVisible) {
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<int> len(0, 70), bound(-40, 40), coin(0, 2);
  const int blocks[] = {8, 10, 16, 32};  // 10: not a power of two, as sm90's 80
  int cases = 0;
  for (int round = 0; round < 400; ++round) {
    Band band;
    if (coin(rng) > 0) band.left = bound(rng);
    if (coin(rng) > 0) band.right = bound(rng);
    if (round % 7 == 0) band = Band{std::nullopt, 0, false};  // causal
    if (round % 11 == 0) band = Band{std::nullopt, 0, true};  // causal, bottom-right
    band.bottom_right = band.bottom_right || coin(rng) == 0;
    const int sq = len(rng), skv = len(rng);
    for (int bm : blocks) {
      for (int bn : blocks) {
        check(band, sq, skv, bm, bn);
        if (HasFatalFailure()) return;
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 400 * 16);
}

}  // namespace
}  // namespace floe
