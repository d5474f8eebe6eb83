// Online softmax over the rows one thread holds of a tensor-core accumulator, in fp32, in base 2.
// The scores and O come as row/col views, which each architecture supplies for its accumulator
// layout (sm80: kernels::acc_row_col of an m16n8 fragment; sm90: sm90::gmma_row_col of a GMMA
// accumulator); the rows of both layouts are shared
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
  static constexpr int kRowCount = kRows;
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
    float correction[kRows];
    float max_scaled[kRows];
    const bool grew = update_max(s, scale_log2, correction, max_scaled);
    // O only needs rescaling when some row's max grew; once the maxima settle (long rows) most
    // tiles skip it. Decided per warp so the branch stays uniform.
    rescale_o(o, correction, __any_sync(0xffffffffu, grew));
    exponentiate(s, scale_log2, max_scaled);
  }

  // update() split for a main loop that overlaps the softmax of tile t with P_{t-1} V_{t-1}
  // (sm90): the scores become P and the sums follow the new max now; O, still being accumulated,
  // takes correction[] later through rescale_o(o, correction, grew) with the returned warp-
  // uniform flag.
  template <class S>
  __device__ __forceinline__ bool scores_to_p(S&& s, float scale_log2, float (&correction)[kRows]) {
    float max_scaled[kRows];
    const bool grew = update_max(s, scale_log2, correction, max_scaled);
    exponentiate(s, scale_log2, max_scaled);
    return __any_sync(0xffffffffu, grew);
  }

  // O *= correction per row, when `grew` (uniform across the warp).
  template <class O>
  __device__ __forceinline__ static void rescale_o(O&& o, const float (&correction)[kRows],
                                                   bool grew) {
    using namespace cute;
    if (grew) {
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) {
        CUTE_UNROLL
        for (int c = 0; c < size<1>(o); ++c) o(r, c) *= correction[r];
      }
    }
  }

  // The rows' new max (scaled, for the exponent) and the factor the old sums and O take; the sums
  // are rescaled here. True when one of this thread's rows grew.
  template <class S>
  __device__ __forceinline__ bool update_max(S&& s, float scale_log2, float (&correction)[kRows],
                                             float (&max_scaled)[kRows]) {
    using namespace cute;
    static_assert(decltype(size<0>(s))::value == kRows, "row count mismatch");
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
      // rescale of O is skipped.
      correction[r] = row_grew ? fast_exp2(row_max[r] * scale_log2 - max_scaled[r]) : 1.f;
      row_max[r] = mx;
      row_sum[r] *= correction[r];
    }
    return grew;
  }

  // Scores -> P = 2^(s*scale_log2 - max_scaled), summed into the rows' sums.
  template <class S>
  __device__ __forceinline__ void exponentiate(S&& s, float scale_log2,
                                               const float (&max_scaled)[kRows]) {
    using namespace cute;
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
