// sm90 backward, first kernel: one CTA per (query tile, head, batch) writes what the main kernel
// reads densely with one bulk copy per visit:
//   delta[i]    = sum_d dO * O (0 for rows past the batch's query length),
//   lse_log2[i] = LSE * log2(e) from the stats (through their strides); +inf for rows past the
//                 batch's query length and rows whose LSE is -inf, so that P = 2^(s2 - lse2) = 0,
//   dq_accum    = 0 over the tile (64 x d floats, whatever their order).
// The same computation as sm80's preprocess, over this engine's row-major dq_accum.
#pragma once

#include <cmath>

#include <cute/tensor.hpp>

#include "engines/sm90/bwd_params.h"
#include "kernels/math.cuh"
#include "kernels/tile_scheduler.cuh"

namespace floe::detail::sm90 {

template <class Element, int kBlockM>
__global__ void __launch_bounds__(256) bwd_preprocess_kernel(const __grid_constant__ BwdParams p) {
  constexpr int kThreads = 256;
  constexpr int kLanesPerRow = 8;  // 8 lanes x 16 bytes = one 64-element slice of a row
  const int tid = static_cast<int>(threadIdx.x);
  const kernels::QueryTile tile = kernels::QueryTileScheduler::tile(p.query_tiles, blockIdx.x);
  const int m_block = tile.m_block, h = tile.h, b = tile.b;
  const int sq_b = p.lens.q_len(b, p.s_q);
  const int m0 = m_block * kBlockM;
  const int64_t row0 = (static_cast<int64_t>(b) * p.h_q + h) * p.s_q_pad + m0;

  const Element* o_bh = static_cast<const Element*>(p.o) + b * p.o_stride_b + h * p.o_stride_h;
  const Element* do_bh = static_cast<const Element*>(p.d_o) + b * p.do_stride_b + h * p.do_stride_h;
  const int lane8 = tid % kLanesPerRow;
  for (int r = tid / kLanesPerRow; r < kBlockM; r += kThreads / kLanesPerRow) {
    const int i = m0 + r;
    float sum = 0.f;
    if (i < sq_b) {
      for (int c = lane8 * 8; c < p.d; c += kLanesPerRow * 8) {
        const uint4 ov = *reinterpret_cast<const uint4*>(o_bh + i * p.o_stride_s + c);
        const uint4 dv = *reinterpret_cast<const uint4*>(do_bh + i * p.do_stride_s + c);
        const Element* oe = reinterpret_cast<const Element*>(&ov);
        const Element* de = reinterpret_cast<const Element*>(&dv);
        CUTE_UNROLL
        for (int e = 0; e < 8; ++e)
          sum = fmaf(static_cast<float>(oe[e]), static_cast<float>(de[e]), sum);
      }
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    sum += __shfl_xor_sync(0xffffffffu, sum, 4);
    if (lane8 == 0) {
      p.delta[row0 + r] = sum;
      float lse2 = INFINITY;
      if (i < sq_b) {
        const float lse =
            p.stats[b * p.stats_stride_b + h * p.stats_stride_h + i * p.stats_stride_s];
        if (lse != -INFINITY) lse2 = lse * kernels::kLog2e;
      }
      p.lse_log2[row0 + r] = lse2;
    }
  }
  float4* acc = reinterpret_cast<float4*>(p.dq_accum + row0 * p.d);
  const int n4 = kBlockM * p.d / 4;
  for (int x = tid; x < n4; x += kThreads) acc[x] = make_float4(0.f, 0.f, 0.f, 0.f);
}

}  // namespace floe::detail::sm90
