// sm90 backward, last kernel: one CTA per (query tile, head, batch) turns the fp32 dQ accumulator
// (row-major, bwd_params.h) into dQ = scale * accum, rounded to the element type and written
// through dQ's strides, 16 bytes a thread. Rows no key tile reached hold the preprocess's zeros.
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm90/bwd_params.h"

namespace floe::detail::sm90 {

template <class Element, int kBlockM>
__global__ void __launch_bounds__(256) bwd_dq_convert_kernel(const __grid_constant__ BwdParams p) {
  constexpr int kThreads = 256;
  const int tid = static_cast<int>(threadIdx.x);
  const int m_block = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.num_m_blocks));
  const int hb = static_cast<int>(blockIdx.x / static_cast<unsigned>(p.num_m_blocks));
  const int h = hb % p.h_q;
  const int b = hb / p.h_q;
  const int m0 = m_block * kBlockM;
  const float* acc = p.dq_accum + ((static_cast<int64_t>(b) * p.h_q + h) * p.s_q_pad + m0) * p.d;
  Element* dq = static_cast<Element*>(p.dq) + b * p.dq_stride_b + h * p.dq_stride_h +
                static_cast<int64_t>(m0) * p.dq_stride_s;
  const int rows = min(kBlockM, p.s_q - m0);
  const int per_row = p.d / 8;
  for (int x = tid; x < rows * per_row; x += kThreads) {
    const int row = x / per_row, col = (x % per_row) * 8;
    const float4 a0 = *reinterpret_cast<const float4*>(acc + row * p.d + col);
    const float4 a1 = *reinterpret_cast<const float4*>(acc + row * p.d + col + 4);
    cute::array<Element, 8> out;
    const float in[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    CUTE_UNROLL
    for (int e = 0; e < 8; ++e) out[e] = static_cast<Element>(in[e] * p.scale);
    *reinterpret_cast<uint4*>(dq + row * p.dq_stride_s + col) = *reinterpret_cast<uint4*>(&out);
  }
}

}  // namespace floe::detail::sm90
