// The softcap of a kernel whose special-function unit, not issue, holds it back: s2 = cap_log2 *
// tanh(q.k * scale / cap) as kernels/score_mod.cuh computes it (tanh = 1 - 2 / (e^(2x) + 1):
// exp2 and rcp on MUFU, and the softmax's exp2 a third MUFU op a score), with every other
// score's reciprocal on the FMA pipe instead (rcp_on_fma), and s2 = cap_log2 - 2 cap_log2 /
// (e + 1) in one FFMA (one rounding, where cap_log2 * (1 - 2 / (e + 1)) takes two). The values
// are those of score_mod.cuh's softcap to within a few fp32 ulps of cap_log2.
#pragma once

#include <cute/tensor.hpp>

#include "kernels/math.cuh"
#include "kernels/score_params.h"

namespace floe::kernels {

// 1/y on the FMA pipe, for y >= 1 (or NaN): an integer first guess (relative error 5%) and three
// Newton steps, each squaring it: within 2^-23.9 of 1/y, as close as rcp.approx. y is first
// clamped to 2^126, NaN kept (min.NaN): the guess of y = inf would be negative, and 1/y past
// 2^126 is 0 to the tanh below either way (its guess, subnormal, flushes to 0).
__device__ __forceinline__ float rcp_on_fma(float y) {
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(y), "f"(0x1p126f));
  float r = __int_as_float(0x7EF311C7 - __float_as_int(y));
  CUTE_UNROLL
  for (int k = 0; k < 3; ++k) {
    const float e = fmaf(-y, r, 1.f);
    r = fmaf(r, e, r);
  }
  return r;
}

// Raw q.k -> log2 units with the softcap, half the reciprocals on the FMA pipe.
template <class Acc>
__device__ __forceinline__ void softcap_scores_half_fma(Acc& acc, const ScoreParams& sp) {
  using namespace cute;
  const float minus_two_cap = -2.f * sp.cap_log2;
  CUTE_UNROLL
  for (int i = 0; i < size(acc); ++i) {
    const float y = fast_exp2(acc(i) * sp.tanh_k) + 1.f;
    acc(i) = fmaf(i & 1 ? rcp_on_fma(y) : fast_rcp(y), minus_two_cap, sp.cap_log2);
  }
}

}  // namespace floe::kernels
