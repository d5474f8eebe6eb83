// sm80 backward: the scores of one (query tile, key tile) visit of the main loop:
//   load_row_stats: per row of the S fragment, LSE in log2 units and Delta (dense chunks the
//                   preprocess wrote);
//   backward_scores: raw q.k -> log2 units (scale or softcap, with d tanh kept for dS), + bias,
//                    then the band and length mask where the tile needs it.
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm80/bwd_params.h"
#include "kernels/band_tiles.cuh"
#include "kernels/mask.cuh"
#include "kernels/score_mod.cuh"
#include "kernels/score_mod_kind.h"
#include "kernels/sm80/fragment.cuh"

namespace floe::detail::sm80 {

template <int kRows, class Coord>
__device__ __forceinline__ void load_row_stats(const BwdParams& p, int64_t row_base,
                                               Coord const& tScS, float (&lse2)[kRows],
                                               float (&delta)[kRows]) {
  using namespace cute;
  auto c = kernels::acc_row_col(tScS);
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const int row = get<0>(c(r, 0));
    lse2[r] = p.lse_log2[row_base + row];
    delta[r] = p.delta[row_base + row];
  }
}

// acc_s: raw q.k of the tile whose first query is m0 and first key n0, of query head h of
// batch b. The plain kernel (kMod plain) leaves raw q.k and folds the scale into the exponent;
// dtanh is written only by the softcap kinds. staged_bias(acc_s) adds the bias from a tile staged
// in shared memory and returns true, or returns false (then it is read from global memory).
template <class T, kernels::ScoreMod kMod, class AccS, class DTanh, class Coord, class StagedBias>
__device__ __forceinline__ void backward_scores(AccS& acc_s, DTanh& dtanh, Coord const& tScS,
                                                const BwdParams& p, int b, int h, int m0, int n0,
                                                const kernels::QueryTiles& qt, int sq_b, int skv_b,
                                                StagedBias&& staged_bias) {
  using Element = typename T::Element;
  if constexpr (kMod != kernels::ScoreMod::plain) {
    if constexpr (kernels::has_softcap_code(kMod)) {
      kernels::softcap_scores(acc_s, dtanh, p.score);
    } else {
      kernels::scale_scores_of<kMod>(acc_s, p.score);
    }
  }
  if constexpr (kernels::has_bias_code(kMod)) {
    if (!staged_bias(acc_s) && p.bias != nullptr) {
      const Element* bias_bh =
          static_cast<const Element*>(p.bias) + b * p.bias_strides.b + h * p.bias_strides.h;
      kernels::add_bias(kernels::acc_row_col(acc_s), kernels::acc_row_col(tScS), bias_bh,
                        p.bias_strides.s, m0, n0, p.s_q, p.s_kv);
    }
  }
  const bool mask_keys = qt.needs_mask(m0, T::kBlockM, n0, T::kBlockN, skv_b);
  if (mask_keys) {
    kernels::mask_scores_either<T::kBlockM>(kernels::acc_row_col(acc_s), kernels::acc_row_col(tScS),
                                            m0, n0, qt.diag_lo, qt.diag_hi, skv_b);
  }
  // Rows past the query length weigh nothing through their LSE (+inf), but a zero-filled q row
  // against an infinite key gives q.k = NaN, which the LSE cannot zero: such rows are masked
  // too (the last query tile only).
  const bool mask_rows = m0 + T::kBlockM > sq_b;
  if (mask_rows) {
    auto s = kernels::acc_row_col(acc_s);
    auto c = kernels::acc_row_col(tScS);
    CUTE_UNROLL
    for (int r = 0; r < cute::size<0>(s); ++r) {
      if (cute::get<0>(c(r, 0)) >= sq_b - m0) {
        CUTE_UNROLL
        for (int j = 0; j < cute::size<1>(s); ++j) s(r, j) = -INFINITY;
      }
    }
  }
  if constexpr (kernels::has_softcap_code(kMod)) {
    // A masked score's q.k can be NaN (an infinite q or k against a zero-filled row): its d tanh
    // must not reach dS, where it would meet P = 0 as 0 * NaN.
    if (mask_keys || mask_rows) {
      CUTE_UNROLL
      for (int i = 0; i < cute::size(acc_s); ++i) {
        if (acc_s(i) == -INFINITY) dtanh(i) = 0.f;
      }
    }
  }
}

}  // namespace floe::detail::sm80
