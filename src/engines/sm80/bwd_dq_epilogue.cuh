// sm80 backward, third kernel: one CTA per (query tile, head, batch) turns the fp32 dQ
// accumulator into dQ = scale * accum, rounded to the element type and written through dQ's
// strides. The accumulator tile is in the main kernel's thread order (bwd_dq_accum.cuh): this
// kernel runs the main kernel's thread count and dQ TiledMMA, so thread t finds its element i at
// dq_accum_offset(i, t) and its (row, col) from the same partition. Rows no key tile reached
// (past the batch's query length, or outside the band) hold the preprocess's zeros.
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm80/bwd_dq_accum.cuh"
#include "engines/sm80/bwd_params.h"

namespace floe::detail::sm80 {

template <class T>
__global__ void __launch_bounds__(T::kThreads)
    bwd_dq_epilogue_kernel(const __grid_constant__ BwdParams p) {
  using namespace cute;
  using Element = typename T::Element;
  const int tid = static_cast<int>(threadIdx.x);
  const int m_block = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.num_m_blocks));
  const int hb = static_cast<int>(blockIdx.x / static_cast<unsigned>(p.num_m_blocks));
  const int h = hb % p.h_q;
  const int b = hb / p.h_q;
  const int m0 = m_block * T::kBlockM;
  const float* acc =
      p.dq_accum + ((static_cast<int64_t>(b) * p.h_q + h) * p.s_q_pad + m0) * T::kDqk;
  Element* dq_tile = static_cast<Element*>(p.dq) + b * p.dq_stride_b + h * p.dq_stride_h +
                     static_cast<int64_t>(m0) * p.dq_stride_s;
  typename T::TiledMmadQ mma;
  auto thr = mma.get_thread_slice(tid);
  Tensor coord =
      thr.partition_C(make_identity_tensor(cute::Shape<Int<T::kBlockM>, Int<T::kDqk>>{}));
  const int rows = p.s_q - m0;
  CUTE_UNROLL
  for (int i = 0; i < size(coord); ++i) {
    const int row = get<0>(coord(i));
    const int col = get<1>(coord(i));
    if (row < rows && col < p.d_qk) {
      dq_tile[row * p.dq_stride_s + col] =
          static_cast<Element>(acc[dq_accum_offset<T::kThreads>(i, tid)] * p.scale);
    }
  }
}

}  // namespace floe::detail::sm80
