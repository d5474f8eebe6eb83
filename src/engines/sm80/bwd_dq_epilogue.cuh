// sm80 backward, third kernel: one CTA per (query tile, head, batch) turns the fp32 dQ
// accumulator into dQ = scale * accum, rounded to the element type and written through dQ's
// strides. The accumulator tile is in the main kernel's thread order (bwd_dq_accum.cuh): this
// kernel runs the main kernel's thread count and dQ TiledMMA, so thread t finds its element i at
// dq_accum_offset(i, t) and its (row, col) from the same partition. Rows no key tile reached
// (past the batch's query length, or outside the band) hold the preprocess's zeros.
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm80/bwd_dq_accum.cuh"
#include "engines/sm80/bwd_epilogue.cuh"
#include "engines/sm80/bwd_params.h"

namespace floe::detail::sm80 {

// kServing: a ragged query side's dQ rows start at the batch's slot and end with it (at most
// s_q); the last query tile also zeroes the slot's rows past the envelope.
template <class T, bool kServing>
__global__ void __launch_bounds__(T::kThreads)
    bwd_dq_epilogue_kernel(const __grid_constant__ BwdParams p) {
  using namespace cute;
  using Element = typename T::Element;
  const int tid = static_cast<int>(threadIdx.x);
  const kernels::QueryTile tile = kernels::QueryTileScheduler::tile(p.query_tiles, blockIdx.x);
  const int m_block = tile.m_block, h = tile.h, b = tile.b;
  const int m0 = m_block * T::kBlockM;
  int q_rows = p.s_q;
  int64_t q0 = 0;
  if constexpr (kServing) {
    const kernels::BatchRows r = kernels::batch_rows(p.serve, p.lens, b, p.s_q, p.s_kv);
    q_rows = r.q_rows;
    q0 = r.q0;
    if (r.q_slot > p.s_q && m0 + T::kBlockM >= p.s_q) {
      zero_rows<Element, T::kThreads>(static_cast<Element*>(p.dq) + h * p.dq_strides.h,
                                      p.dq_strides.s, q0 + p.s_q, r.q_slot - p.s_q, p.d_qk, tid);
    }
    if (m0 >= q_rows) return;  // past the slot: the next slot's tokens
  }
  const float* acc = p.dq_accum + p.ws_row<T::kBlockM, kServing>(b, h, q0, m0) * T::kDqk;
  Element* dq_tile = static_cast<Element*>(p.dq) + b * p.dq_strides.b + h * p.dq_strides.h +
                     (q0 + m0) * p.dq_strides.s;
  typename T::TiledMmadQ mma;
  auto thr = mma.get_thread_slice(tid);
  Tensor coord =
      thr.partition_C(make_identity_tensor(cute::Shape<Int<T::kBlockM>, Int<T::kDqk>>{}));
  const int rows = q_rows - m0;
  CUTE_UNROLL
  for (int i = 0; i < size(coord); ++i) {
    const int row = get<0>(coord(i));
    const int col = get<1>(coord(i));
    if (row < rows && col < p.d_qk) {
      dq_tile[row * p.dq_strides.s + col] =
          static_cast<Element>(acc[dq_accum_offset<T::kThreads>(i, tid)] * p.scale);
    }
  }
}

}  // namespace floe::detail::sm80
