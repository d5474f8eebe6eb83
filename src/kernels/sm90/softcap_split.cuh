// The sm90 forward's softcap (its score-mod kernel), with part of its special-function work moved
// onto the FMA pipe.
//
// The score in log2 units less the cap, h' = s2 - cap_log2 = -2 cap_log2 / (2^y + 1) with
// y = q.k tanh_k, in [-2 cap_log2, 0]: the softmax takes h' with scale 1, its LSE then less the
// cap, which the epilogue gives back (engines/sm90/fwd_params.h). A score costs FMUL, MUFU.EX2,
// FFMA (the denominator scaled by -1 / (2 cap_log2), so the reciprocal is h' itself) and
// MUFU.RCP: one instruction fewer than cap_log2 (1 - 2 / (2^y + 1)). With the softmax's exp2
// that is three MUFU operations a score where the plain kernel has one.
//
// Every other reciprocal runs on the FMA pipe instead (neg_rcp_newton: an integer first guess
// and three Newton steps, 8 instructions with the clamp). H200, d128, S 4096, B 4, Hq 16,
// softcap 30, fixed max (fwd_plan.cc), one call at 58114ca (every form in one kernel): 1.258 ms
// against 1.283 with every reciprocal on the MUFU. A MUFU operation costs about as much as 9
// FMA-pipe instructions in this loop (the two consumer warps a scheduler holds cannot hide its 8
// clocks a warp), so a replacement pays only when it is shorter than that: the tanh's exp2 as a
// degree-5 polynomial (12 instructions) measured slower before (sm90, same problem: 1/2, 3/4 and
// all of them 1.379, 1.471, 1.527 ms against 1.367; removed since). The hardware's tanh.approx.f32
// (one MUFU operation for the tanh) errs by 2^-11 relative, 512 times the harness's cap * 2^-20
// allowance for the score (tests/support/harness_tolerance.h): not used.
//
// Accuracy: the reciprocal (MUFU or Newton) and the FFMA err by a few 2^-24 relative in h', the
// exp2 by about 2^-22.5 relative in 2^y, which moves h' by at most cap_log2 2^-23.5: within the
// harness's cap * 2^-20.
#pragma once

#include <cute/tensor.hpp>

#include "kernels/math.cuh"

namespace floe::kernels {

// min that returns NaN when either input is NaN (fminf would drop it; a NaN score must reach the
// output, DESIGN 2).
__device__ __forceinline__ float min_nan(float a, float b) {
  float y;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}

// -1 / d for d > 0 normal, on the FMA pipe: an integer first guess (relative error under 1/8),
// then Newton steps r += r (1 - d r), the last one negated: within about 2^-23 relative. NaN
// stays NaN.
__device__ __forceinline__ float neg_rcp_newton(float d) {
  float r = __int_as_float(0x7ef311c3 - __float_as_int(d));
  float t = __fmaf_rn(-d, r, 1.f);
  r = __fmaf_rn(r, t, r);
  t = __fmaf_rn(-d, r, 1.f);
  r = __fmaf_rn(r, t, r);
  t = __fmaf_rn(-d, r, 1.f);
  return __fmaf_rn(-r, t, -r);
}

// Raw q.k -> h' = -2 cap_log2 / (2^(q.k tanh_k) + 1), neg_a = -1 / (2 cap_log2). Ends: q.k = +inf
// gives -0 (s2 = cap_log2), -inf gives -2 cap_log2 (s2 = -cap_log2); NaN stays NaN. The odd
// elements' reciprocal by neg_rcp_newton, their exponent clamped to 64 first (2^64 + 1 is as
// good as inf there, and the first guess needs a finite d: h' is then -2 cap_log2 2^-64, not -0).
template <class Acc>
__device__ __forceinline__ void softcap_folded(Acc& acc, float tanh_k, float neg_a) {
  using namespace cute;
  CUTE_UNROLL
  for (int i = 0; i < size(acc); ++i) {
    if (i % 2 == 1) {
      const float e = fast_exp2(min_nan(acc(i) * tanh_k, 64.f));
      acc(i) = neg_rcp_newton(__fmaf_rn(e, -neg_a, -neg_a));
    } else {
      acc(i) = fast_rcp(__fmaf_rn(fast_exp2(acc(i) * tanh_k), neg_a, neg_a));
    }
  }
}

}  // namespace floe::kernels
