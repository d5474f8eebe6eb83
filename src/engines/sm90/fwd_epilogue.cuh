// sm90 forward: the epilogue of one consumer warpgroup. Normalises O, zeroes rows past the
// batch's query length, writes the stats (natural-log LSE, fp32) through their strides, and
// writes O as f16/bf16 straight from the accumulator through its strides: two neighbouring
// columns per 4-byte store, a quad covering 16 contiguous bytes of a row. (A TMA store through
// shared memory is the next step.)
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm90/fwd_params.h"
#include "engines/sm90/gmma_fragment.cuh"

namespace floe::detail::sm90 {

template <class T, class AccO, class Softmax>
__device__ __forceinline__ void fwd_epilogue(const FwdParams& p, int ctid, int m0, int h, int b,
                                             int sq_b, AccO& acc_o, const Softmax& softmax) {
  using namespace cute;
  using Element = typename T::Element;
  typename T::MmaPV mma_pv;
  auto thr_pv = mma_pv.get_thread_slice(ctid);
  Tensor tOcO =
      thr_pv.partition_C(make_identity_tensor(cute::Shape<typename T::BM, typename T::D>{}));
  auto o = gmma_row_col(acc_o);
  auto oc = gmma_row_col(tOcO);
  constexpr int kRows = decltype(size<0>(o))::value;
  float factor[kRows], lse[kRows];
  softmax.finalize(p.scale_log2, factor, lse);

  Element* o_bh = static_cast<Element*>(p.o) + b * p.o_stride_b + h * p.o_stride_h;
  float* stats_bh =
      p.stats == nullptr ? nullptr : p.stats + b * p.stats_stride_b + h * p.stats_stride_h;
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const int row = m0 + get<0>(oc(r, 0));
    if (row >= p.s_q) continue;
    const bool valid = row < sq_b;
    Element* o_row = o_bh + row * p.o_stride_s;
    CUTE_UNROLL
    for (int c = 0; c < size<1>(o); c += 2) {
      const int col = get<1>(oc(r, c));
      Element pair[2] = {static_cast<Element>(valid ? o(r, c) * factor[r] : 0.f),
                         static_cast<Element>(valid ? o(r, c + 1) * factor[r] : 0.f)};
      *reinterpret_cast<uint32_t*>(o_row + col) = *reinterpret_cast<uint32_t*>(pair);
    }
    if (stats_bh != nullptr && ctid % 4 == 0) {
      stats_bh[row * p.stats_stride_s] = valid ? lse[r] : -INFINITY;
    }
  }
}

}  // namespace floe::detail::sm90
