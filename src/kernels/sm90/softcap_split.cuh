// The softcap of kernels/score_mod.cuh with part of its exp2 moved off the special-function unit.
//
// With a softcap every score takes three MUFU operations (exp2 and a reciprocal for the tanh, exp2
// for P) where a plain score takes one: the MUFU unit (16 results a clock per SM, an eighth of the
// FMA pipe's rate) then outlasts the tile's GEMMs. FlashAttention 4's lever (HOPPER.md §5): compute
// a share of the exp2s by a polynomial on the FMA pipe, so that both units finish about together.
// Here the share is of the tanh's exp2, the one inside the score: P's exp2 (kernels/
// online_softmax.cuh) stays as it is for every kernel. On the H200 (sm90 d128, S 4096) every share
// measured slower than none (0 / 2 / 3 / 4 in 4: 1.367 / 1.379 / 1.471 / 1.527 ms; plain 0.817):
// the softmax is bound by issue slots as much as by the MUFU, and exp2_poly's 10 instructions cost
// more than the MUFU operation they replace. sm90 uses kPolyOf4 = 0 (the one-FFMA last step
// remains); the polynomial stays for a part whose balance differs.
//
// The tanh's exp2 needs fp32 accuracy, not bf16's: a relative error e in 2^x moves tanh by at most
// e / 2 and the score by cap * e / 2 (the harness allows cap * 2^-20 for the whole tanh). Degree 5
// on [-1/2, 1/2] errs by 2.3e-7 (2^-22) evaluated in fp32, about as the MUFU's ex2.approx does.
#pragma once

#include <cute/tensor.hpp>

#include "kernels/math.cuh"
#include "kernels/score_params.h"

namespace floe::kernels {

// min / max that return NaN when either input is NaN (fminf / fmaxf would drop it; a NaN score
// must reach the output, DESIGN 2).
__device__ __forceinline__ float min_nan(float a, float b) {
  float y;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}
__device__ __forceinline__ float max_nan(float a, float b) {
  float y;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}

// 2^x on the FMA pipe for x in [-125, 125] (clamped there: 2^+-125 is as good as 0 or inf for
// 1 / (2^x + 1)), NaN for NaN: x = j + f with j the nearest integer and f in [-1/2, 1/2];
// 2^f by a degree-5 fit of its relative error (2.3e-7 in fp32), 2^j from exponent bits.
__device__ __forceinline__ float exp2_poly(float x) {
  constexpr float kRound = 12582912.f;  // 1.5 * 2^23: x + kRound holds round(x) in its low bits
  const float xc = max_nan(min_nan(x, 125.f), -125.f);
  // _rn intrinsics: never contracted or folded, so (xc + kRound) - kRound stays a rounding.
  const float t = __fadd_rn(xc, kRound);
  const float f = __fsub_rn(xc, __fsub_rn(t, kRound));
  float p = 1.3276436366140842e-3f;
  p = __fmaf_rn(p, f, 9.675535373389721e-3f);
  p = __fmaf_rn(p, f, 5.550713464617729e-2f);
  p = __fmaf_rn(p, f, 2.4022120237350464e-1f);
  p = __fmaf_rn(p, f, 6.931469440460205e-1f);
  p = __fmaf_rn(p, f, 1.0000001192092896f);
  // t's low bits are j (two's complement): shifted into the exponent field and biased, 2^j.
  // Multiplied rather than added to p's bits, so that a NaN p stays NaN.
  const float two_j = __int_as_float((__float_as_int(t) << 23) + 0x3f800000);
  return p * two_j;
}

// Raw q.k -> cap * log2(e) * tanh(q.k * scale / cap), as score_mod.cuh's scale_scores does with a
// softcap, but the tanh's exp2 of kPolyOf4 elements in every 4 on the FMA pipe (exp2_poly), the
// rest on the MUFU; and cap_log2 (1 - 2r) as one FFMA, cap_log2 - 2 cap_log2 r (exact at r = 0
// and r = 1, so the ends stay +-cap).
template <int kPolyOf4, class Acc>
__device__ __forceinline__ void softcap_scores_split(Acc& acc, const ScoreParams& sp) {
  using namespace cute;
  static_assert(kPolyOf4 >= 0 && kPolyOf4 <= 4, "a share in quarters");
  const float cap = sp.cap_log2, minus_2cap = -2.f * sp.cap_log2;
  CUTE_UNROLL
  for (int i = 0; i < size(acc); ++i) {
    const float x2 = acc(i) * sp.tanh_k;
    const float e = i % 4 < kPolyOf4 ? exp2_poly(x2) : fast_exp2(x2);
    acc(i) = __fmaf_rn(minus_2cap, fast_rcp(e + 1.f), cap);
  }
}

// 1 / d for d > 0 normal, on the FMA pipe: an integer first guess (relative error under 1/8),
// then Newton steps r += r (1 - d r), the last one negated: returns -1 / d, within about 2^-23
// relative. NaN stays NaN.
__device__ __forceinline__ float neg_rcp_newton(float d) {
  float r = __int_as_float(0x7ef311c3 - __float_as_int(d));
  float t = __fmaf_rn(-d, r, 1.f);
  r = __fmaf_rn(r, t, r);
  t = __fmaf_rn(-d, r, 1.f);
  r = __fmaf_rn(r, t, r);
  t = __fmaf_rn(-d, r, 1.f);
  return __fmaf_rn(-r, t, -r);
}

// Raw q.k -> h' = s2 - cap_log2 = -2 cap_log2 / (exp2(q.k tanh_k) + 1), in [-2 cap_log2, 0]: the
// softcapped score in log2 units less the cap (fwd_params.h), for a softmax that takes h' with
// scale 1 (its LSE then less the cap, which the epilogue gives back). Four instructions a score
// (FMUL, MUFU.EX2, FFMA, MUFU.RCP) where softcap_scores_split issues five: neg_a = -1 / (2
// cap_log2) scales the denominator, so the reciprocal is h' itself. Ends: q.k = +inf gives -0
// (s2 = cap_log2), -inf gives -2 cap_log2 (s2 = -cap_log2); NaN stays NaN.
// kNewton: every other reciprocal on the FMA pipe (neg_rcp_newton), its exponent clamped to 64
// first (2^64 + 1 is as good as inf there, and the first guess needs a finite d).
template <bool kNewton, class Acc>
__device__ __forceinline__ void softcap_folded(Acc& acc, float tanh_k, float neg_a) {
  using namespace cute;
  CUTE_UNROLL
  for (int i = 0; i < size(acc); ++i) {
    if (kNewton && i % 2 == 1) {
      const float e = fast_exp2(min_nan(acc(i) * tanh_k, 64.f));
      acc(i) = neg_rcp_newton(__fmaf_rn(e, -neg_a, -neg_a));
    } else {
      acc(i) = fast_rcp(__fmaf_rn(fast_exp2(acc(i) * tanh_k), neg_a, neg_a));
    }
  }
}

}  // namespace floe::kernels
