// sm80: what happens to a tile of scores after S = Q K^T, in the forward (before the softmax)
// and in the backward (before P = 2^(s2 - lse2)). Params is FwdParams or BwdParams.
//
// score-mod (kernel flag): raw q.k -> log2 units, s2 = q.k * scale * log2(e), or with a softcap
// s2 = cap * log2(e) * tanh(q.k * scale / cap); then + bias * log2(e) (bias read from global
// through its strides, broadcast dims at stride 0).
// mask (per tile, only on tiles the band or the key length cuts): invisible scores become -inf.
#pragma once

#include <cute/tensor.hpp>

#include "kernels/band_tiles.cuh"
#include "kernels/sm80/fragment.cuh"
#include "kernels/math.cuh"

namespace floe::detail::sm80 {

// tanh(x) = 1 - 2 / (e^(2x) + 1): exact at both ends (e^(2x) = 0 or inf), absolute error about
// 1e-7 in between. x2 = 2 x log2(e).
__device__ __forceinline__ float tanh_of_2x_log2e(float x2) {
  return 1.f - 2.f * kernels::fast_rcp(kernels::fast_exp2(x2) + 1.f);
}

// Raw q.k -> log2 units: s2 = q.k * scale_log2, or with a softcap s2 = cap_log2 * tanh(q.k *
// scale / cap).
template <class Acc, class Params>
__device__ __forceinline__ void scale_scores(Acc& acc, const Params& p) {
  using namespace cute;
  if (p.has_softcap) {
    CUTE_UNROLL
    for (int i = 0; i < size(acc); ++i) acc(i) = p.cap_log2 * tanh_of_2x_log2e(acc(i) * p.tanh_k);
  } else {
    CUTE_UNROLL
    for (int i = 0; i < size(acc); ++i) acc(i) *= p.scale_log2;
  }
}

// The softcap case of scale_scores for the backward, which also needs d tanh = 1 - tanh^2 of
// every score (the factor between dS and the gradient of q.k / scale).
template <class Acc, class DTanh, class Params>
__device__ __forceinline__ void softcap_scores(Acc& acc, DTanh& dtanh, const Params& p) {
  using namespace cute;
  CUTE_UNROLL
  for (int i = 0; i < size(acc); ++i) {
    const float t = tanh_of_2x_log2e(acc(i) * p.tanh_k);
    dtanh(i) = 1.f - t * t;
    acc(i) = p.cap_log2 * t;
  }
}

// s2 += bias * log2(e), the bias read from global through its strides (broadcast dims at
// stride 0); acc is the tile whose first query is m0 and first key n0, coord the (row, col)
// within the tile of each element.
template <class Acc, class Coord, class Element, class Params>
__device__ __forceinline__ void add_bias(Acc& acc, Coord const& coord, const Params& p,
                                         const Element* bias_bh, int m0, int n0) {
  using namespace cute;
  // Row by row (a short loop nest unrolls fully; one flat loop over a big tile may not, which
  // would put the scores in local memory).
  auto s = kernels::acc_row_col(acc);
  auto c = kernels::acc_row_col(coord);
  CUTE_UNROLL
  for (int r = 0; r < size<0>(s); ++r) {
    const int row = m0 + get<0>(c(r, 0));
    if (row >= p.s_q) continue;
    const Element* bias_row = bias_bh + row * p.bias_stride_s;
    CUTE_UNROLL
    for (int j = 0; j < size<1>(s); ++j) {
      const int col = n0 + get<1>(c(r, j));
      if (col < p.s_kv) s(r, j) += static_cast<float>(bias_row[col]) * kernels::kLog2e;
    }
  }
}

// The forward's score-mod step: log2 units, then the bias.
template <class Acc, class Coord, class Element, class Params>
__device__ __forceinline__ void apply_score_mod(Acc& acc, Coord const& coord, const Params& p,
                                                const Element* bias_bh, int m0, int n0) {
  scale_scores(acc, p);
  if (bias_bh != nullptr) add_bias(acc, coord, p, bias_bh, m0, n0);
}

// Scores of keys a row may not see (outside the band, or past the batch's key length) become
// -inf. Only the tiles the band cuts need it, but at short causal lengths those are many, so the
// per-element work is the least it can be: each row of the thread's fragment turns the bounds
// into a column interval once, and each element compares its compile-time column against it.
//
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
    const int first = kernels::add_sat(lo, dr);
    const int last = min(kernels::add_sat(hi, dr), last_col);
    CUTE_UNROLL
    for (int j = 0; j < size<1>(s); ++j) {
      const int dc = get<1>(c(r, j)) - col0;
      if (dc > last || (kTestLeft && dc < first)) s(r, j) = -INFINITY;
    }
  }
}

// kMaskBand tests both sides of the band (two compares and a select an element); kMaskRight
// only its right side and the key length (one compare and a select), for tiles with no key left
// of the band (every causal tile). The forward chooses above its tile loop: inside a tile,
// ptxas if-converts the choice and issues both variants.
inline constexpr int kMaskRight = 1;
inline constexpr int kMaskBand = 2;

template <int kMask, class Acc, class Coord>
__device__ __forceinline__ void mask_scores(Acc& acc, Coord const& coord, int m0, int n0,
                                            int diag_lo, int diag_hi, int skv_b) {
  using namespace cute;
  auto s = kernels::acc_row_col(acc);
  auto c = kernels::acc_row_col(coord);
  const int row0 = get<0>(c(0, 0)), col0 = get<1>(c(0, 0));
  const int d0 = (n0 + col0) - (m0 + row0);
  mask_rows<kMask == kMaskBand>(s, c, row0, col0, kernels::add_sat(diag_lo, -d0),
                                kernels::add_sat(diag_hi, -d0), skv_b - n0 - col0 - 1);
}

// The backward's mask: the same choice made inside the tile, per tile. It issues both variants
// on masked tiles, but the plain loop of the d64 backward, which shares the kernel, measured 5%
// faster in this form than with either variant alone (A/B on the H200: register allocation and
// schedule, not the masked tiles).
template <int kBlockM, class Acc, class Coord>
__device__ __forceinline__ void mask_scores_either(Acc& acc, Coord const& coord, int m0, int n0,
                                                   int diag_lo, int diag_hi, int skv_b) {
  // Uniform across the CTA: the tile's lowest key - query is n0 - (m0 + kBlockM - 1).
  if (n0 - (m0 + kBlockM - 1) >= diag_lo) {
    mask_scores<kMaskRight>(acc, coord, m0, n0, diag_lo, diag_hi, skv_b);
  } else {
    mask_scores<kMaskBand>(acc, coord, m0, n0, diag_lo, diag_hi, skv_b);
  }
}

}  // namespace floe::detail::sm80
