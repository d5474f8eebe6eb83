// The band and key-length mask of one tile of scores, for every tensor-core engine: scores of
// keys a row may not see (outside the band, or past the batch's key length) become -inf. Only the
// tiles the band cuts need it (band_tiles.cuh says which), but at short causal lengths those are
// many, so the per-element work is the least it can be: each row of the thread's fragment turns
// the bounds into a column interval once, and each element compares its compile-time column
// against it.
//
// The scores and their (row, col) within the tile come as row/col views, which each architecture
// supplies for its accumulator layout (sm80: kernels::acc_row_col of an m16n8 fragment; sm90:
// sm90::gmma_row_col of a GMMA accumulator).
#pragma once

#include <cute/tensor.hpp>

#include "kernels/math.cuh"

namespace floe::kernels {

// Element (r, j) sits at row offset dr and column offset dc from the thread's first element
// (both constants); key - query = d0 + dc - dr must lie in [diag_lo, diag_hi] and the key below
// skv_b: dc in [diag_lo - d0 + dr, diag_hi - d0 + dr] and dc < cols.
template <bool kTestLeft, class S, class C>
__device__ __forceinline__ void mask_rows(S& s, C const& c, int row0, int col0, int lo, int hi,
                                          int last_col) {
  using namespace cute;
  CUTE_UNROLL
  for (int r = 0; r < size<0>(s); ++r) {
    const int dr = get<0>(c(r, 0)) - row0;
    const int first = add_sat(lo, dr);
    const int last = min(add_sat(hi, dr), last_col);
    CUTE_UNROLL
    for (int j = 0; j < size<1>(s); ++j) {
      const int dc = get<1>(c(r, j)) - col0;
      if (dc > last || (kTestLeft && dc < first)) s(r, j) = -INFINITY;
    }
  }
}

// kNoMask: a tile every row sees whole. kMaskBand tests both sides of the band (two compares and
// a select an element); kMaskRight only its right side and the key length (one compare and a
// select), for tiles with no key left of the band (every causal tile). The sm80 forward chooses
// above its tile loop: inside a tile, ptxas if-converts the choice and issues both variants.
inline constexpr int kNoMask = 0;
inline constexpr int kMaskRight = 1;
inline constexpr int kMaskBand = 2;

// s, c: row/col views of the scores and their coordinates in the tile whose first query is m0
// and first key n0.
template <int kMask, class S, class C>
__device__ __forceinline__ void mask_scores(S&& s, C const& c, int m0, int n0, int diag_lo,
                                            int diag_hi, int skv_b) {
  using namespace cute;
  const int row0 = get<0>(c(0, 0)), col0 = get<1>(c(0, 0));
  const int d0 = (n0 + col0) - (m0 + row0);
  mask_rows<kMask == kMaskBand>(s, c, row0, col0, add_sat(diag_lo, -d0), add_sat(diag_hi, -d0),
                                skv_b - n0 - col0 - 1);
}

// The same choice made inside the tile, per tile (the sm80 backward's form). It issues both
// variants on masked tiles, but the plain loop of the sm80 d64 backward, which shares the kernel,
// measured 5% faster in this form than with either variant alone (A/B on the H200: register
// allocation and schedule, not the masked tiles).
template <int kBlockM, class S, class C>
__device__ __forceinline__ void mask_scores_either(S&& s, C const& c, int m0, int n0, int diag_lo,
                                                   int diag_hi, int skv_b) {
  // Uniform across the CTA: the tile's lowest key - query is n0 - (m0 + kBlockM - 1).
  if (n0 - (m0 + kBlockM - 1) >= diag_lo) {
    mask_scores<kMaskRight>(s, c, m0, n0, diag_lo, diag_hi, skv_b);
  } else {
    mask_scores<kMaskBand>(s, c, m0, n0, diag_lo, diag_hi, skv_b);
  }
}

// The same mask over transposed scores S^T (rows keys, columns queries), as a key-stationary
// backward computes them: element (r, j) is key n0 + row, query m0 + col. Each row (one key)
// turns the bounds into an interval of columns once: key - query = d0 + dr - dc lies in
// [diag_lo, diag_hi] iff dc lies in [d0 + dr - diag_hi, d0 + dr - diag_lo]; a key past skv_b
// masks its whole row. kMaskRight tests the band's right side (queries below the interval) and
// the key length, kMaskBand both sides.
__device__ __forceinline__ int neg_sat(int x) {
  return x == INT32_MIN ? INT32_MAX : -x;
}

template <int kMask, class S, class C>
__device__ __forceinline__ void mask_scores_transposed(S&& s, C const& c, int m0, int n0,
                                                       int diag_lo, int diag_hi, int skv_b) {
  using namespace cute;
  const int row0 = get<0>(c(0, 0)), col0 = get<1>(c(0, 0));
  const int d0 = (n0 + row0) - (m0 + col0);
  const int last_row = skv_b - n0 - row0 - 1;
  const int neg_hi = neg_sat(diag_hi), neg_lo = neg_sat(diag_lo);
  CUTE_UNROLL
  for (int r = 0; r < size<0>(s); ++r) {
    const int dr = get<0>(c(r, 0)) - row0;
    const int first = dr > last_row ? INT32_MAX : add_sat(d0 + dr, neg_hi);
    const int last = add_sat(d0 + dr, neg_lo);
    CUTE_UNROLL
    for (int j = 0; j < size<1>(s); ++j) {
      const int dc = get<1>(c(r, j)) - col0;
      if (dc < first || (kMask == kMaskBand && dc > last)) s(r, j) = -INFINITY;
    }
  }
}

// mask_scores_transposed with the variant chosen per tile (uniform across the CTA), as
// mask_scores_either.
template <int kBlockM, class S, class C>
__device__ __forceinline__ void mask_scores_transposed_either(S&& s, C const& c, int m0, int n0,
                                                              int diag_lo, int diag_hi, int skv_b) {
  if (n0 - (m0 + kBlockM - 1) >= diag_lo) {
    mask_scores_transposed<kMaskRight>(s, c, m0, n0, diag_lo, diag_hi, skv_b);
  } else {
    mask_scores_transposed<kMaskBand>(s, c, m0, n0, diag_lo, diag_hi, skv_b);
  }
}

}  // namespace floe::kernels
