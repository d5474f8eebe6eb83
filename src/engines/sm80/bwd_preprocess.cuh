// sm80 backward, first kernel: one CTA per (query tile, head, batch) prepares what the main
// kernel reads densely, so that its inner loop does no strided or conditional reads:
//   delta[i]    = sum_d dO * O (0 for rows past the batch's query length),
//   lse_log2[i] = LSE * log2(e) from the stats (through their strides); +inf for rows past the
//                 batch's query length and rows whose LSE is -inf, so that P = 2^(s2 - lse2) = 0,
//   dq_accum    = 0 over the tile's rows, and the tile's dQ semaphore = 0 (deterministic),
//   the broadcast dBias's semaphores of the tile's rows = 0.
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm80/bwd_params.h"
#include "kernels/preprocess_rows.cuh"

namespace floe::detail::sm80 {

// One query tile's rows of the per-row chunks: Delta and LSE in log2 units, and its dQ
// accumulator tile zeroed (block_m x dq_ld floats, 16 bytes a thread).
template <class T, bool kServing>
__device__ __forceinline__ void preprocess_tile(const BwdParams& p, int tid, int b, int h,
                                                int64_t q0, int m0, int sq_b) {
  using Element = typename T::Element;
  constexpr int kThreads = 256;
  const int64_t row0 = p.ws_row<T::kBlockM, kServing>(b, h, q0, m0);
  kernels::PreprocessRows rows = kernels::PreprocessRows::at<Element>(
      p.o, p.o_strides, p.d_o, p.do_strides, p.stats, p.stats_strides, b, h, q0);
  rows.d = p.d_v;
  rows.m0 = m0;
  rows.rows = sq_b;
  rows.delta = p.delta + row0;
  rows.lse_log2 = p.lse_log2 + row0;
  kernels::preprocess_rows<Element, T::kBlockM, kThreads>(rows, tid);
  float4* acc = reinterpret_cast<float4*>(p.dq_accum + row0 * p.dq_ld);
  const int n4 = T::kBlockM * p.dq_ld / 4;
  for (int x = tid; x < n4; x += kThreads) acc[x] = make_float4(0.f, 0.f, 0.f, 0.f);
}

// kServing: a ragged query side's O, dO and stats rows start at the batch's slot.
template <class T, bool kServing>
__global__ void __launch_bounds__(256) bwd_preprocess_kernel(const __grid_constant__ BwdParams p) {
  constexpr int kThreads = 256;
  const int tid = static_cast<int>(threadIdx.x);
  const kernels::QueryTile tile = kernels::QueryTileScheduler::tile(p.query_tiles, blockIdx.x);
  const int m_block = tile.m_block, h = tile.h, b = tile.b;
  int sq_b;
  int64_t q0 = 0;
  const int m0 = m_block * T::kBlockM;
  bool rows_here = true;
  if constexpr (kServing) {
    const kernels::BatchRows r = kernels::batch_rows(p.serve, p.lens, b, p.s_q, p.s_kv);
    sq_b = r.sq;
    q0 = r.q0;
    // Packed workspace rows: a tile past the slot has none (they are the next slot's).
    rows_here = !p.ws_packed || m0 < r.q_rows;
  } else {
    sq_b = p.lens.q_len(b, p.s_q);
  }
  if (rows_here) preprocess_tile<T, kServing>(p, tid, b, h, q0, m0, sq_b);
  if (p.dq_sem != nullptr && tid == 0) {
    p.dq_sem[(static_cast<int64_t>(b) * p.h_q + h) * p.num_m_blocks + m_block] = 0;
  }
  // A broadcast dBias: the semaphores of the bias tiles of this query tile, zeroed by the CTA of
  // the first broadcast batch and head.
  if (p.dbias_sem != nullptr && (p.bias_b > 1 || b == 0) && (p.bias_h > 1 || h == 0)) {
    int32_t* sem =
        p.dbias_sem +
        ((static_cast<int64_t>(b) * p.bias_h + h) * p.num_m_blocks + m_block) * p.num_n_blocks;
    for (int n = tid; n < p.num_n_blocks; n += kThreads) sem[n] = 0;
  }
}

}  // namespace floe::detail::sm80
