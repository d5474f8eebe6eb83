// sm90 backward: the scores of one visit in the consumers' S^T and dP^T accumulators turned into
// P^T and dS^T (keys along the rows, queries along the columns, each thread's values named by the
// identity tensor of its partition), for the main kernels of bwd_kernel.cuh and
// bwd_wide_kernel.cuh. lse and delta are the visit's row stats in shared memory, by query.
#pragma once

#include <cmath>

#include <cute/tensor.hpp>

#include "engines/sm90/bwd_params.h"
#include "engines/sm90/gmma_fragment.cuh"
#include "kernels/band_tiles.cuh"
#include "kernels/mask.cuh"
#include "kernels/score_mod.cuh"

namespace floe::detail::sm90::bwd {

// P^T = 2^(s * scale_log2 - lse2[query]), 0 where the band or the key length hides the key
// (masked to -inf first). The bias kernel's s holds q.k + bias / scale (bwd_bias.cuh).
// The softcap kernel: s2 = cap_log2 * t with t = tanh(q.k * scale / cap), and dS needs d tanh
// = 1 - t^2 beside P (sm80's backward_scores and kernels/score_mod.cuh: the same tanh, the
// same mask, d tanh 0 where masked). Kept as t in acc_s until P, then P goes to rP (the dV
// operand) and acc_s keeps P * d tanh, so that dS^T = (P^T d tanh) (dP^T - Delta): one fp32
// fragment fewer live under the dP product than P and d tanh apart (those spilled 612 bytes
// at d128).
// The plain kernel leaves P^T in acc_s (rP is filled from it with dS); the softcap kernel fills
// rP (the element type) here.
template <class T, class AccS, class RP, class Coords>
__device__ __forceinline__ void probabilities(const BwdParams& p, const kernels::QueryTiles& qt,
                                              AccS& acc_s, RP& rP, const Coords& tScS,
                                              const float* lse, int m0, int n0, int skv_b) {
  using namespace cute;
  using Element = typename T::Element;
  auto s = gmma_row_col(acc_s);
  auto c = gmma_row_col(tScS);
  if constexpr (T::kSoftcap) {
    CUTE_UNROLL
    for (int i = 0; i < size(acc_s); ++i) {
      acc_s(i) = kernels::tanh_of_2x_log2e(acc_s(i) * p.score.tanh_k);
    }
  }
  if (qt.needs_mask(m0, T::kBlockM, n0, T::kBlockN, skv_b)) {
    kernels::mask_scores_transposed_either<T::kBlockM>(s, c, m0, n0, qt.diag_lo, qt.diag_hi, skv_b);
  }
  if constexpr (T::kSoftcap) {
    auto rp = gmma_row_col(rP);
    const float cap_log2 = p.score.cap_log2;
    CUTE_UNROLL
    for (int j = 0; j < size<1>(s); ++j) {
      const float lse2 = lse[get<1>(c(0, j))];
      // A padding (or empty) query row has lse2 = +inf and sees nothing. Its Q row is zero in
      // shared memory, so an infinite key gives it q.k = 0 * inf = NaN, which the softcap
      // would carry into P and dS (the plain kernel's reference is NaN there anyway; with a
      // softcap the reference is finite): its t is taken as 0, so that P = 2^-inf = 0 and
      // dS = 0 * (1 - 0) = 0. One select an element: two (P, dS) and their predicates' OR
      // cost 344 instructions and 19% at 651ac7f (BACKWARD.md).
      const bool dead = lse2 == INFINITY;
      CUTE_UNROLL
      for (int r = 0; r < size<0>(s); ++r) {
        const float t = dead ? 0.f : s(r, j);
        const float pr = exp2f(t * cap_log2 - lse2);
        rp(r, j) = static_cast<Element>(pr);
        // Masked (t = -inf): d tanh counts as 0, as sm80's, so that a NaN q.k there cannot
        // reach dS.
        s(r, j) = t == -INFINITY ? 0.f : pr * (1.f - t * t);
      }
    }
  } else {
    CUTE_UNROLL
    for (int j = 0; j < size<1>(s); ++j) {
      const float lse2 = lse[get<1>(c(0, j))];
      CUTE_UNROLL
      for (int r = 0; r < size<0>(s); ++r) s(r, j) = exp2f(s(r, j) * p.score.scale_log2 - lse2);
    }
  }
}

// dS^T = P^T (dP^T - Delta[query]) into acc_dp; the softcap kernel's acc_s holds P^T d tanh, and
// its dS is then the gradient of q.k * scale, as without one (dQ and dK take the scale at the end).
template <class AccS, class AccDp, class Coords>
__device__ __forceinline__ void scores_gradient(const AccS& acc_s, AccDp& acc_dp,
                                                const Coords& tScS, const float* delta) {
  using namespace cute;
  auto s = gmma_row_col(acc_s);
  auto dp = gmma_row_col(acc_dp);
  auto c = gmma_row_col(tScS);
  CUTE_UNROLL
  for (int j = 0; j < size<1>(dp); ++j) {
    const float d = delta[get<1>(c(0, j))];
    CUTE_UNROLL
    for (int r = 0; r < size<0>(dp); ++r) dp(r, j) = s(r, j) * (dp(r, j) - d);
  }
}

}  // namespace floe::detail::sm90::bwd
