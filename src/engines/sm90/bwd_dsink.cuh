// sm90 backward, the sink's gradient (the _dsink variants' fourth kernel): one CTA per query head
// sums dsink_h = -sum_{b, i} 2^(sink_h * log2(e) - lse2_{b,h,i}) * delta_{b,h,i} over the
// preprocess's dense lse_log2 and delta chunks (rows past a batch's length hold lse2 = +inf and
// add nothing), in fp64 by a fixed order: the same code as sm80's (kernels/preprocess_rows.cuh).
#pragma once

#include "engines/sm90/bwd_params.h"
#include "kernels/constants.h"
#include "kernels/preprocess_rows.cuh"

namespace floe::detail::sm90 {

// A template (as the preprocess) so that each bwd_<tile>.cu has its own copy.
template <class Element, int kBlockM>
__global__ void __launch_bounds__(256) bwd_dsink_kernel(const __grid_constant__ BwdParams p) {
  constexpr int kThreads = 256;
  __shared__ double partial[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const int h = static_cast<int>(blockIdx.x);
  const float sink_log2 = p.sink[h * p.sink_stride] * kernels::kLog2e;
  double sum = 0.0;
  for (int b = 0; b < p.b; ++b) {
    const int64_t row0 = (static_cast<int64_t>(b) * p.h_q + h) * p.s_q_pad;
    sum = kernels::dsink_rows<kThreads>(p.lse_log2 + row0, p.delta + row0, p.s_q, sink_log2, tid,
                                        sum);
  }
  kernels::block_sum_fixed<kThreads>(sum, partial, tid);
  if (tid == 0) p.dsink[h * p.dsink_stride] = static_cast<float>(-partial[0]);
}

}  // namespace floe::detail::sm90
