// sm90 backward, first kernel: one CTA per (query tile, head, batch) writes what the main kernel
// reads densely with one bulk copy per visit:
//   delta[i]    = sum_d dO * O (0 for rows past the batch's query length),
//   lse_log2[i] = LSE * log2(e) from the stats (through their strides); +inf for rows past the
//                 batch's query length and rows whose LSE is -inf, so that P = 2^(s2 - lse2) = 0,
//   dq_accum    = 0 over the tile (64 x d floats, whatever their order),
//   dq_sem      = 0 for the tile (deterministic mode: no key tile has added yet),
//   dbias_accum = 0 over the tile's row of dBias tiles (a summed dBias, bwd_bias.cuh),
//   dbias_sem   = 0 for that row's tiles (deterministic mode with a summed dBias).
// delta and lse_log2 as sm80's preprocess computes them (kernels/preprocess_rows.cuh); the
// accumulator is this engine's.
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm90/bwd_params.h"
#include "kernels/preprocess_rows.cuh"
#include "kernels/tile_scheduler.cuh"

namespace floe::detail::sm90 {

template <class Element, int kBlockM>
__global__ void __launch_bounds__(256) bwd_preprocess_kernel(const __grid_constant__ BwdParams p) {
  constexpr int kThreads = 256;
  const int tid = static_cast<int>(threadIdx.x);
  const kernels::QueryTile tile = kernels::QueryTileScheduler::tile(p.query_tiles, blockIdx.x);
  const int m_block = tile.m_block, h = tile.h, b = tile.b;
  const int sq_b = p.lens.q_len(b, p.s_q);
  const int m0 = m_block * kBlockM;
  const int64_t row0 = (static_cast<int64_t>(b) * p.h_q + h) * p.s_q_pad + m0;

  kernels::PreprocessRows rows = kernels::PreprocessRows::at<Element>(
      p.o, p.o_strides, p.d_o, p.do_strides, p.stats, p.stats_strides, b, h, /*q0=*/0);
  rows.d = p.d_v;
  rows.m0 = m0;
  rows.rows = sq_b;
  rows.delta = p.delta + row0;
  rows.lse_log2 = p.lse_log2 + row0;
  kernels::preprocess_rows<Element, kBlockM, kThreads>(rows, tid);
  float4* acc = reinterpret_cast<float4*>(p.dq_accum + row0 * p.d);
  const int n4 = kBlockM * p.d / 4;
  for (int x = tid; x < n4; x += kThreads) acc[x] = make_float4(0.f, 0.f, 0.f, 0.f);
  // A summed dBias: the query tile's row of accumulator tiles, zeroed by the CTA of the first
  // batch and head summed into it (b < dbias_b and h < dbias_h name one CTA a row).
  if (p.dbias_accum != nullptr && b < p.dbias_b && h < p.dbias_h) {
    const int64_t row = (static_cast<int64_t>(b) * p.dbias_h + h) * p.num_m_blocks + m_block;
    const int64_t floats = static_cast<int64_t>(p.num_n_blocks) * p.dbias_tile_floats;
    float4* t = reinterpret_cast<float4*>(p.dbias_accum + row * floats);
    for (int64_t x = tid; x < floats / 4; x += kThreads) t[x] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (p.dbias_sem != nullptr) {
      for (int x = tid; x < p.num_n_blocks; x += kThreads)
        p.dbias_sem[row * p.num_n_blocks + x] = 0;
    }
  }
  if (p.dq_sem != nullptr && tid == 0) {
    p.dq_sem[(static_cast<int64_t>(b) * p.h_q + h) * p.num_m_blocks + m_block] = 0;
  }
}

}  // namespace floe::detail::sm90
