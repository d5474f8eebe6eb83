// sm80 forward: what happens to a tile of scores between S = Q K^T and the softmax.
//
// score-mod (kernel flag): raw q.k -> log2 units, s2 = q.k * scale * log2(e), or with a softcap
// s2 = cap * log2(e) * tanh(q.k * scale / cap); then + bias * log2(e) (bias read from global
// through its strides, broadcast dims at stride 0).
// mask (per tile, only on tiles the band or the key length cuts): invisible scores become -inf.
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm80/fwd_params.h"
#include "kernels/band_tiles.cuh"
#include "kernels/sm80_fragment.cuh"
#include "kernels/sm80_math.cuh"

namespace floe::detail::sm80 {

// acc: (4, MMA_M, MMA_N) raw q.k of the tile whose first query is m0 and first key n0;
// coord: the (row, col) within the tile of each accumulator element.
template <class Acc, class Coord, class Element>
__device__ __forceinline__ void apply_score_mod(Acc& acc, Coord const& coord, const FwdParams& p,
                                                const Element* bias_bh, int m0, int n0) {
  using namespace cute;
  if (p.has_softcap) {
    // tanh(x) = 1 - 2 / (e^(2x) + 1): exact at both ends (e^(2x) = 0 or inf), absolute error
    // about 1e-7 in between.
    const float two_cap = 2.f * p.cap_log2;
    CUTE_UNROLL
    for (int i = 0; i < size(acc); ++i) {
      acc(i) =
          p.cap_log2 - two_cap * kernels::fast_rcp(kernels::fast_exp2(acc(i) * p.tanh_k) + 1.f);
    }
  } else {
    CUTE_UNROLL
    for (int i = 0; i < size(acc); ++i) acc(i) *= p.scale_log2;
  }
  if (bias_bh != nullptr) {
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
}

// Scores of keys a row may not see (outside the band, or past the batch's key length) become
// -inf. The band test is on the distance from the diagonal, so no per-row state is kept.
template <class Acc, class Coord>
__device__ __forceinline__ void apply_mask(Acc& acc, Coord const& coord, int m0, int n0,
                                           int diag_lo, int diag_hi, int skv_b) {
  using namespace cute;
  CUTE_UNROLL
  for (int i = 0; i < size(acc); ++i) {
    const int key = n0 + get<1>(coord(i));
    const int dist = key - (m0 + get<0>(coord(i)));
    if (key >= skv_b || dist < diag_lo || dist > diag_hi) acc(i) = -INFINITY;
  }
}

}  // namespace floe::detail::sm80
