// sm90 forward: the element mask of the boundary key tiles (the band's sides and the batch's key
// length). Key j is visible to query i iff diag_lo <= j - i <= diag_hi and j < skv_b
// (kernels/band_tiles.cuh). Per row the bounds become a column interval once; each element
// compares its compile-time column offset against it. kMaskRight: no tile of the CTA has a key
// left of the band (every causal CTA), so only the right side and the length are tested. The
// same arithmetic as sm80's mask_scores, over the GMMA row/col view (gmma_fragment.cuh).
#pragma once

#include <cmath>

#include <cute/tensor.hpp>

#include "engines/sm90/gmma_fragment.cuh"
#include "kernels/math.cuh"

namespace floe::detail::sm90 {

inline constexpr int kNoMask = 0;
inline constexpr int kMaskRight = 1;
inline constexpr int kMaskBand = 2;

// acc: the scores of the tile whose first query is m0 and first key n0; coord: the (row, col)
// within the tile of each, partitioned like acc.
template <int kMask, class Acc, class Coord>
__device__ __forceinline__ void mask_scores(Acc& acc, Coord const& coord, int m0, int n0,
                                            int diag_lo, int diag_hi, int skv_b) {
  using namespace cute;
  static_assert(kMask == kMaskRight || kMask == kMaskBand, "a masked tile");
  auto s = gmma_row_col(acc);
  auto c = gmma_row_col(coord);
  const int row0 = get<0>(c(0, 0)), col0 = get<1>(c(0, 0));
  const int d0 = (n0 + col0) - (m0 + row0);  // key - query of the thread's first element
  const int lo = kernels::add_sat(diag_lo, -d0), hi = kernels::add_sat(diag_hi, -d0);
  const int last_col = skv_b - n0 - col0 - 1;
  CUTE_UNROLL
  for (int r = 0; r < size<0>(s); ++r) {
    const int dr = get<0>(c(r, 0)) - row0;
    const int first = kernels::add_sat(lo, dr);
    const int last = min(kernels::add_sat(hi, dr), last_col);
    CUTE_UNROLL
    for (int j = 0; j < size<1>(s); ++j) {
      const int dc = get<1>(c(r, j)) - col0;
      if (dc > last || (kMask == kMaskBand && dc < first)) s(r, j) = -INFINITY;
    }
  }
}

}  // namespace floe::detail::sm90
