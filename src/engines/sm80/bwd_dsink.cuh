// sm80 backward, the sink's gradient: one CTA per head sums
// dsigma_h = -sum_{b, i < sq_b} exp(sigma_h - LSE_{b,h,i}) * Delta_{b,h,i}
// from the preprocess's dense lse_log2 (+inf past the batch's length, so those rows add 0) and
// delta, in fp64, each thread over a fixed index set and then a fixed tree: bitwise the same on
// every run (kernels/preprocess_rows.cuh, shared with sm90).
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm80/bwd_params.h"
#include "kernels/math.cuh"
#include "kernels/preprocess_rows.cuh"

namespace floe::detail::sm80 {

// A template (on the tile's traits, unused) so that every bwd_<tile>.cu gets its own copy
// instead of two definitions of one kernel.
template <class T>
__global__ void __launch_bounds__(256) bwd_dsink_kernel(const __grid_constant__ BwdParams p) {
  constexpr int kThreads = 256;
  __shared__ double partial[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const int h = static_cast<int>(blockIdx.x);
  const float sink_log2 = p.sink[h * p.sink_stride] * kernels::kLog2e;
  double sum = 0.0;
  for (int b = 0; b < p.b; ++b) {
    int64_t row0;
    int rows = p.s_q;
    if (p.ws_packed) {  // a ragged query side: the batch's rows only (the rest are other slots')
      const kernels::BatchRows r = kernels::batch_rows(p.serve, p.lens, b, p.s_q, p.s_kv);
      row0 = p.ws_row<T::kBlockM, true>(b, h, r.q0, 0);
      rows = r.sq;
    } else {
      row0 = p.ws_row<T::kBlockM, false>(b, h, 0, 0);
    }
    sum =
        kernels::dsink_rows<kThreads>(p.lse_log2 + row0, p.delta + row0, rows, sink_log2, tid, sum);
  }
  kernels::block_sum_fixed<kThreads>(sum, partial, tid);
  if (tid == 0) p.dsink[h * p.dsink_stride] = static_cast<float>(-partial[0]);
}

}  // namespace floe::detail::sm80
