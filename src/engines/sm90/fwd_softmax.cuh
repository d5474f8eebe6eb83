// sm90 forward: online softmax in base 2 over the rows one thread holds of a GMMA accumulator
// (gmma_fragment.cuh). The same arithmetic as kernels/online_softmax.cuh (sm80's), over the
// GMMA row/col view; kept apart so the two can be merged behind one view later.
//
// Scores are raw q.k; p = exp2(qk * scale_log2 - max * scale_log2), one FFMA and one MUFU.EX2 an
// element. A row with no visible key yet keeps max = -inf and uses 0 in the exponent, so masked
// scores (-inf) give exactly 0, never NaN.
#pragma once

#include <cmath>

#include <cute/tensor.hpp>

#include "engines/sm90/gmma_fragment.cuh"
#include "kernels/math.cuh"

namespace floe::detail::sm90 {

template <int kRows>
struct FwdSoftmax {
  static constexpr int kRowCount = kRows;
  float row_max[kRows];
  float row_sum[kRows];  // this thread's share; summed over the quad in finalize()

  __device__ __forceinline__ void init() {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.f;
    }
  }

  // scores -> P (in place), the row sums rescaled to the new max; correction[r] is the factor
  // O must take for row r (rescale_o), true when some row of the warp grew (the uniform branch
  // rescale_o takes). Split from rescale_o so that P V of the previous tile can run while this
  // one's softmax does.
  template <class Scores>
  __device__ __forceinline__ bool scores_to_p(Scores& scores, float scale_log2,
                                              float (&correction)[kRows]) {
    using namespace cute;
    auto s = gmma_row_col(scores);
    static_assert(decltype(size<0>(s))::value == kRows, "row count mismatch");
    float max_scaled[kRows];
    bool grew = false;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float mx = row_max[r], mx1 = -INFINITY;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); c += 2) {
        mx = fmaxf(mx, s(r, c));
        mx1 = fmaxf(mx1, s(r, c + 1));
      }
      mx = kernels::quad_max(fmaxf(mx, mx1));
      const bool row_grew = mx > row_max[r];
      grew |= row_grew;
      max_scaled[r] = mx == -INFINITY ? 0.f : mx * scale_log2;
      // An unchanged max gives exactly 1, so a skipped rescale of O stays consistent with l.
      correction[r] = row_grew ? kernels::fast_exp2(row_max[r] * scale_log2 - max_scaled[r]) : 1.f;
      row_max[r] = mx;
      row_sum[r] *= correction[r];
    }
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float sum0 = 0.f, sum1 = 0.f;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); c += 2) {
        const float p0 = kernels::fast_exp2(s(r, c) * scale_log2 - max_scaled[r]);
        const float p1 = kernels::fast_exp2(s(r, c + 1) * scale_log2 - max_scaled[r]);
        s(r, c) = p0;
        s(r, c + 1) = p1;
        sum0 += p0;
        sum1 += p1;
      }
      row_sum[r] += sum0 + sum1;
    }
    return __any_sync(0xffffffffu, grew);
  }

  // O *= correction per row, skipped when no row of the warp grew (long rows mostly skip it).
  template <class AccO>
  __device__ __forceinline__ static void rescale_o(AccO& acc_o, const float (&correction)[kRows],
                                                   bool grew) {
    using namespace cute;
    if (!grew) return;
    auto o = gmma_row_col(acc_o);
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      CUTE_UNROLL
      for (int c = 0; c < size<1>(o); ++c) o(r, c) *= correction[r];
    }
  }

  // factor[r] turns row r of the accumulated O into the output; lse[r] is the row's natural-log
  // LSE (-inf and factor 0 for a row that saw no key).
  __device__ __forceinline__ void finalize(float scale_log2, float (&factor)[kRows],
                                           float (&lse)[kRows]) const {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const float l = kernels::quad_sum(row_sum[r]);
      // l is 0 exactly when no key counted; a NaN (or +inf) score makes l NaN, which must reach
      // O and the LSE (DESIGN 2), so such a row is not "empty".
      const bool empty = l == 0.f;
      factor[r] = empty ? 0.f : kernels::fast_rcp(l);
      lse[r] =
          empty ? -INFINITY : (row_max[r] * scale_log2 + kernels::fast_log2(l)) * kernels::kLn2;
    }
  }
};

}  // namespace floe::detail::sm90
