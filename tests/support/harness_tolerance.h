// How far an engine's output may sit from the fp64 reference's: every tolerance of the GPU
// tests lives here, derived from the error a correct engine makes (DESIGN P8: fp32
// accumulation, no worse than FlashAttention-2 on the same inputs).
//
// Both sides read the same inputs, already rounded to the dtype, so the difference is the
// engine's arithmetic alone:
//
//  1. Scores. s = scale * q.k sums Dqk products in fp32: products of two f16/bf16 values are
//     exact in fp32, the sum errs by at most about sqrt(Dqk) * 2^-24 * |q| |k| for random
//     signs (we allow 4x that), bounded through Cauchy-Schwarz by the largest row norms.
//     Folding scale * log2(e) into exp2, adding the bias and taking exp/log cost a few fp32
//     ulps of |s| + |bias|. Softcap's tanh, in fp32 (tanhf, or 1 - 2 / (exp2(x) + 1) with
//     fast exp2 and reciprocal), errs by a few 2^-24 absolute: cap * 2^-20 in the score. (The
//     hardware's tanh.approx.f32, relative error 2^-11, would need cap * 2^-11 and a looser
//     softcap derivative in the backward; no floe engine uses it, and the harness does not
//     allow it.) Call the sum eps_s. A score error eps_s moves P = exp(s - LSE) by the factor
//     exp(+-2 eps_s).
//  2. The second GEMM. FlashAttention-style kernels round P (and dS in the backward) to the
//     input dtype before multiplying: relative error u, the dtype's unit roundoff (2^-8 for
//     bf16, 2^-11 for f16). The sum over keys (forward) or queries (backward) of these errors
//     has random signs, so it grows like the output itself, not like the sum of |terms|:
//     it is bounded by a few u times the largest |value| of the same row (the row shares its
//     P or dS weights across the last dim and differs only by random operands). Gradients
//     accumulate over whole sequences; the row scale carries that growth.
//  3. The output store rounds to the dtype: u * |x|, twice for margin.
//  4. A floor of two subnormal steps of the dtype: f16 flushes values below 2^-24 to its
//     subnormal grid; engine and reference may land on neighbouring steps.
//
//  5. Cancellation (backward only). dS = P (dP - Delta) subtracts fp32 dot products of Dv
//     terms that are equal where one key takes a row's whole weight; the reference's 0 is
//     then the engine's noise, about sqrt(Dv) 2^-24 times the terms that cancelled. Bounds on
//     those terms per element of dq, dk and dbias (mag) come from harness_magnitudes.h; we
//     allow 8 (sqrt(Dv) + 1) 2^-24 mag, still far below any real error (mag is of the order
//     of the outputs' own size).
//
// Hence, for o, dq, dk, dv, dbias:
//     |x - ref| <= 2u |ref| + 4 (u + 2 eps_s) * rowmax|ref| + c_mag * mag + floor
// where rowmax is taken over the last dim (d for o/dq/dk/dv, keys for dbias). A row the
// problem leaves empty or pads out is exactly 0 in the reference, so there the engine must
// write 0 (to within the floor). The typical error of a correct kernel is about u/2 of the
// row scale; a wrong mask, a lost key block or a mis-strided load moves whole rows by a
// large fraction of it.
//
// stats (fp32 log-sum-exp): |x - ref| <= 2^-16 |ref| + 2 eps_s + 2^-16. A lost key moves it by
// about P of that key, at least 1/Skv, far above.
//
// dsink (fp32, a sum over every row of a head): |x - ref| <= 2^-16 |ref| + 2^-14 * mag, with
// mag = sum over valid rows of exp(sink - LSE) * sum_d |dO O|: fp32 products and sums only
// (LSE, sink, O and dO are inputs), Dv-term dot products included.
//
// -inf must match -inf exactly (stats of empty rows); NaN never passes.
#pragma once

#include <cmath>
#include <optional>
#include <string>

#include "floe/tensor.h"

namespace floe::test {

// Half the gap between 1 and the next representable number (round to nearest even).
inline double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::f16:
      return std::ldexp(1.0, -11);
    case DType::bf16:
      return std::ldexp(1.0, -8);
    default:
      return std::ldexp(1.0, -24);
  }
}

// Two steps of the dtype's subnormal grid.
inline double subnormal_floor(DType dtype) {
  switch (dtype) {
    case DType::f16:
      return std::ldexp(1.0, -23);
    case DType::bf16:
      return std::ldexp(1.0, -132);
    default:
      return std::ldexp(1.0, -148);
  }
}

// What the tolerances depend on, measured on the case's inputs.
struct ToleranceInputs {
  DType dtype = DType::bf16;
  int64_t d_qk = 64;
  int64_t d_v = 64;
  // |scale| * max_i |q_i| * max_j |k_j| (row 2-norms): no score exceeds it.
  double score_bound = 0;
  double bias_max = 0;  // max |bias|, 0 without a bias
  std::optional<double> softcap;
};

// eps_s of item 1 above: how far a correct fp32 engine's scores may be from exact.
inline double score_error(const ToleranceInputs& t) {
  const double f32 = std::ldexp(1.0, -24);
  double e = 4.0 * std::sqrt(static_cast<double>(t.d_qk)) * f32 * t.score_bound +
             8.0 * f32 * (t.score_bound + t.bias_max);
  if (t.softcap) e += *t.softcap * std::ldexp(1.0, -20);
  return e;
}

// bound = rel * |ref| + row * row_scale + mag * magnitude + floor; row_scale as the comment
// above defines it per output (rowmax|ref|, or mag for dsink, or unused for stats), magnitude
// the element's cancellation scale (dq, dk, dbias; 0 elsewhere).
struct Tolerance {
  double rel = 0;
  double row = 0;
  double mag = 0;
  double floor = 0;

  double bound(double ref, double row_scale, double magnitude) const {
    return rel * std::fabs(ref) + row * row_scale + mag * magnitude + floor;
  }
};

// The tolerance of output `name` ("o", "stats", "dq", "dk", "dv", "dbias", "dsink").
inline Tolerance tolerance_for(const std::string& name, const ToleranceInputs& t) {
  const double u = unit_roundoff(t.dtype);
  const double eps_s = score_error(t);
  Tolerance tol;
  if (name == "stats") {
    tol.rel = std::ldexp(1.0, -16);
    tol.floor = 2.0 * eps_s + std::ldexp(1.0, -16);
  } else if (name == "dsink") {
    tol.rel = std::ldexp(1.0, -16);
    tol.row = std::ldexp(1.0, -14);
    tol.floor = 1e-30;
  } else {  // o, dq, dk, dv, dbias
    tol.rel = 2.0 * u;
    tol.row = 4.0 * (u + 2.0 * eps_s);
    tol.floor = subnormal_floor(t.dtype);
    if (name == "dq" || name == "dk" || name == "dbias") {
      tol.mag = 8.0 * (std::sqrt(static_cast<double>(t.d_v)) + 1.0) * std::ldexp(1.0, -24);
    }
  }
  return tol;
}

}  // namespace floe::test
