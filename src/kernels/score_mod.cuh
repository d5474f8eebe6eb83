// What happens to a tile of scores after S = Q K^T, before the softmax (forward) or before
// P = 2^(s2 - lse2) (backward), in every tensor-core engine:
// raw q.k -> log2 units, s2 = q.k * scale * log2(e), or with a softcap
// s2 = cap * log2(e) * tanh(q.k * scale / cap); then + bias * log2(e) (bias read from global
// through its strides, broadcast dims at stride 0, or from a tile the engine staged in shared
// memory).
//
// Elementwise steps take the accumulator as it is; steps that need an element's (row, col) take
// the accumulator and the tile's coordinates as row/col views, which each architecture supplies
// for its accumulator layout (sm80: kernels::acc_row_col of an m16n8 fragment;
// sm90: sm90::gmma_row_col of a GMMA accumulator).
#pragma once

#include <cute/tensor.hpp>

#include "kernels/constants.h"
#include "kernels/math.cuh"
#include "kernels/score_mod_kind.h"
#include "kernels/score_params.h"

namespace floe::kernels {

// tanh(x) = 1 - 2 / (e^(2x) + 1): exact at both ends (e^(2x) = 0 or inf), absolute error about
// 1e-7 in between. x2 = 2 x log2(e).
__device__ __forceinline__ float tanh_of_2x_log2e(float x2) {
  return 1.f - 2.f * fast_rcp(fast_exp2(x2) + 1.f);
}

// Raw q.k -> log2 units: s2 = q.k * scale_log2, or with a softcap s2 = cap_log2 * tanh(q.k *
// scale / cap).
template <class Acc>
__device__ __forceinline__ void scale_scores(Acc& acc, const ScoreParams& sp) {
  using namespace cute;
  if (sp.has_softcap) {
    CUTE_UNROLL
    for (int i = 0; i < size(acc); ++i) acc(i) = sp.cap_log2 * tanh_of_2x_log2e(acc(i) * sp.tanh_k);
  } else {
    CUTE_UNROLL
    for (int i = 0; i < size(acc); ++i) acc(i) *= sp.scale_log2;
  }
}

// scale_scores of a kernel compiled for one score-mod kind (kernels/score_mod_kind.h): the
// softcap or the scale alone, with no runtime choice (ptxas if-converts one and issues both).
template <ScoreMod kMod, class Acc>
__device__ __forceinline__ void scale_scores_of(Acc& acc, const ScoreParams& sp) {
  using namespace cute;
  static_assert(kMod != ScoreMod::plain, "the plain kernel folds the scale into the exponent");
  if constexpr (has_softcap_code(kMod)) {
    CUTE_UNROLL
    for (int i = 0; i < size(acc); ++i) acc(i) = sp.cap_log2 * tanh_of_2x_log2e(acc(i) * sp.tanh_k);
  } else {
    CUTE_UNROLL
    for (int i = 0; i < size(acc); ++i) acc(i) *= sp.scale_log2;
  }
}

// The softcap case of scale_scores for the backward, which also needs d tanh = 1 - tanh^2 of
// every score (the factor between dS and the gradient of q.k / scale).
template <class Acc, class DTanh>
__device__ __forceinline__ void softcap_scores(Acc& acc, DTanh& dtanh, const ScoreParams& sp) {
  using namespace cute;
  CUTE_UNROLL
  for (int i = 0; i < size(acc); ++i) {
    const float t = tanh_of_2x_log2e(acc(i) * sp.tanh_k);
    dtanh(i) = 1.f - t * t;
    acc(i) = sp.cap_log2 * t;
  }
}

// s2 += bias * log2(e), the bias read from global through its strides (broadcast dims at
// stride 0): s and c are the row/col views of the scores and of their (row, col) within the
// tile whose first query is m0 and first key n0; bias_bh the bias of the tile's (batch, head),
// rows bias_stride_s apart; rows past s_q and keys past s_kv are not read.
template <class S, class C, class Element>
__device__ __forceinline__ void add_bias(S&& s, C const& c, const Element* bias_bh,
                                         int64_t bias_stride_s, int m0, int n0, int s_q, int s_kv) {
  using namespace cute;
  // Row by row (a short loop nest unrolls fully; one flat loop over a big tile may not, which
  // would put the scores in local memory).
  CUTE_UNROLL
  for (int r = 0; r < size<0>(s); ++r) {
    const int row = m0 + get<0>(c(r, 0));
    if (row >= s_q) continue;
    const Element* bias_row = bias_bh + row * bias_stride_s;
    CUTE_UNROLL
    for (int j = 0; j < size<1>(s); ++j) {
      const int col = n0 + get<1>(c(r, j));
      if (col < s_kv) s(r, j) += static_cast<float>(bias_row[col]) * kLog2e;
    }
  }
}

// s += bias * unit, the bias a tile the engine staged in shared memory (zero-filled past s_q and
// s_kv, so nothing is bounded): s is the row/col view of the scores, bias(r, j) the bias of
// elements (r, j) and (r, j + 1) of that view (j even: tensor-core accumulators hold column
// pairs), read at an address the engine computes for its accumulator layout (sm90:
// sm90::GmmaBiasTile). unit: log2(e) for scores in log2 units (after a softcap); 1 / scale for
// raw q.k, whose scale the softmax folds into its exponent as the plain kernels do.
template <class S, class Bias>
__device__ __forceinline__ void add_bias_tile(S&& s, Bias const& bias, float unit) {
  using namespace cute;
  CUTE_UNROLL
  for (int r = 0; r < size<0>(s); ++r) {
    CUTE_UNROLL
    for (int j = 0; j < size<1>(s); j += 2) {
      const float2 b = bias(r, j);
      s(r, j) += b.x * unit;
      s(r, j + 1) += b.y * unit;
    }
  }
}

}  // namespace floe::kernels
