// Online softmax over the rows one thread holds of a tensor-core accumulator, in fp32, in base 2.
// The scores and O come as row/col views, which each architecture supplies for its accumulator
// layout (sm80: kernels::acc_row_col of an m16n8 fragment); the rows of both layouts are shared
// by the four lanes of a quad (quad_max, quad_sum).
//
// The scores handed to update() are in some unit u; score * scale_log2 is in log2 units (the plain
// kernel passes raw q.k and scale*log2(e), folding the scale into one FFMA per element; the
// score-mod kernel passes log2 units and 1). Per row the state is the running max m (in u) and
// this thread's share of l = sum 2^(s*scale_log2 - m*scale_log2); O is rescaled whenever m grows.
// A row that has seen no visible key keeps m = -inf and l = 0; exponents then use 0 for the max,
// so masked scores (-inf) give exactly 0 and never NaN.
//
// finalize() folds in the optional sink (one more logit sigma, natural units, joins only the
// denominator) and yields per row the factor that turns the accumulated O into the output, and
// the natural-log LSE: LSE = ln(sum_visible e^s + e^sigma); no visible key and no sink: factor 0
// and LSE = -inf.
#pragma once

#include <cmath>

#include <cute/tensor.hpp>

#include "kernels/constants.h"
#include "kernels/math.cuh"

namespace floe::kernels {

template <int kRows>
struct OnlineSoftmax {
  float row_max[kRows];
  float row_sum[kRows];

  __device__ __forceinline__ void init() {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.f;
    }
  }

  // s: (rows, cols) view of the scores, fp32, overwritten with
  // P = 2^(s*scale_log2 - max*scale_log2). o: (rows, cols of O) view of the O accumulator, fp32,
  // rescaled to the new max.
  template <class S, class O>
  __device__ __forceinline__ void update(S&& s, O&& o, float scale_log2) {
    using namespace cute;
    static_assert(decltype(size<0>(s))::value == kRows, "row count mismatch");
    float correction[kRows];
    float max_scaled[kRows];
    bool grew = false;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      // Two independent chains (the column count is even) halve the dependent latency.
      float mx = row_max[r], mx1 = -INFINITY;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); c += 2) {
        mx = fmaxf(mx, s(r, c));
        mx1 = fmaxf(mx1, s(r, c + 1));
      }
      mx = quad_max(fmaxf(mx, mx1));
      const bool row_grew = mx > row_max[r];
      grew |= row_grew;
      max_scaled[r] = mx == -INFINITY ? 0.f : mx * scale_log2;
      // On a row's first visible tile the old max is -inf: the factor is 2^-inf = 0, and l and
      // O are 0 anyway. An unchanged max gives exactly 1, so l and O stay consistent when the
      // rescale of O is skipped below.
      correction[r] = row_grew ? fast_exp2(row_max[r] * scale_log2 - max_scaled[r]) : 1.f;
      row_max[r] = mx;
      row_sum[r] *= correction[r];
    }
    // O only needs rescaling when some row's max grew; once the maxima settle (long rows) most
    // tiles skip it. Decided per warp so the branch stays uniform.
    if (__any_sync(0xffffffffu, grew)) {
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) {
        CUTE_UNROLL
        for (int c = 0; c < size<1>(o); ++c) o(r, c) *= correction[r];
      }
    }
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float sum0 = 0.f, sum1 = 0.f;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); c += 2) {
        const float p0 = fast_exp2(s(r, c) * scale_log2 - max_scaled[r]);
        const float p1 = fast_exp2(s(r, c + 1) * scale_log2 - max_scaled[r]);
        s(r, c) = p0;
        s(r, c + 1) = p1;
        sum0 += p0;
        sum1 += p1;
      }
      row_sum[r] += sum0 + sum1;
    }
  }

  // factor[r]: multiply the accumulated O of row r by it; lse[r]: the row's natural-log LSE.
  // On the special-function unit and without branches: it runs once per CTA, but at short
  // lengths the epilogue is a good part of a CTA's time. A row with a visible key or a finite
  // sink has l >= 1 (the largest term is 2^0), where rcp and lg2 are accurate to about 2^-22.
  __device__ __forceinline__ void finalize(float scale_log2, bool has_sink, float sink,
                                           float (&factor)[kRows], float (&lse)[kRows]) const {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float l = quad_sum(row_sum[r]);
      const float m = row_max[r] == -INFINITY ? -INFINITY : row_max[r] * scale_log2;  // log2 units
      float top = m;      // the largest exponent: l and the sink are taken relative to it
      float scale = 1.f;  // 2^(m - top)
      if (has_sink) {
        const float sink_log2 = sink * kLog2e;
        top = fmaxf(m, sink_log2);
        const float base = top == -INFINITY ? 0.f : top;  // keeps -inf - -inf out
        scale = fast_exp2(m - base);
        l = l * scale + fast_exp2(sink_log2 - base);
      }
      // l is 0 exactly when no term counted (top is then -inf); a NaN score or sink makes l
      // NaN, which must reach O and the LSE (DESIGN 2), so it is not "empty".
      const bool empty = l == 0.f;
      factor[r] = empty ? 0.f : scale * fast_rcp(l);
      lse[r] = empty ? -INFINITY : (top + fast_log2(l)) * kLn2;
    }
  }
};

}  // namespace floe::kernels
