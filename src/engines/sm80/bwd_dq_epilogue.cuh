// sm80 backward, third kernel: one CTA per (query tile, head, batch) turns the fp32 dQ
// accumulator into dQ = scale * accum, rounded to the element type and written through dQ's
// strides with 16-byte stores. Rows no key tile reached (past the batch's query length, or
// outside the band) hold the preprocess's zeros.
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm80/bwd_params.h"

namespace floe::detail::sm80 {

template <class T>
__global__ void __launch_bounds__(256) bwd_dq_epilogue_kernel(const __grid_constant__ BwdParams p) {
  using Element = typename T::Element;
  constexpr int kThreads = 256;
  const int tid = static_cast<int>(threadIdx.x);
  const int m_block = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.num_m_blocks));
  const int hb = static_cast<int>(blockIdx.x / static_cast<unsigned>(p.num_m_blocks));
  const int h = hb % p.h_q;
  const int b = hb / p.h_q;
  const int m0 = m_block * T::kBlockM;
  const float* acc =
      p.dq_accum + ((static_cast<int64_t>(b) * p.h_q + h) * p.s_q_pad + m0) * p.dq_ld;
  Element* dq_bh = static_cast<Element*>(p.dq) + b * p.dq_stride_b + h * p.dq_stride_h;
  const int chunks = p.d_qk / 8;  // 8 elements (16 bytes) a store
  for (int x = tid; x < T::kBlockM * chunks; x += kThreads) {
    const int r = x / chunks;
    const int c = (x % chunks) * 8;
    if (m0 + r >= p.s_q) break;  // rows past s_q are not dQ's
    const float4 a0 = *reinterpret_cast<const float4*>(acc + r * p.dq_ld + c);
    const float4 a1 = *reinterpret_cast<const float4*>(acc + r * p.dq_ld + c + 4);
    const float f[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    uint4 out;
    Element* oe = reinterpret_cast<Element*>(&out);
    CUTE_UNROLL
    for (int e = 0; e < 8; ++e) oe[e] = static_cast<Element>(f[e] * p.scale);
    *reinterpret_cast<uint4*>(dq_bh + (m0 + r) * p.dq_stride_s + c) = out;
  }
}

}  // namespace floe::detail::sm80
