// sm90 forward: the epilogue of one consumer warpgroup. Normalises O (in the score-mod kernel the
// sink joins the denominator), zeroes rows past the batch's query length, writes the stats
// (natural-log LSE, fp32) through their strides, and writes O as f16/bf16 through its strides:
// registers -> the warpgroup's own rows of the Q tile in shared memory (only its own products read
// them, and they are done) -> 16-byte stores, a row's bytes by neighbouring threads.
#pragma once

#include <cutlass/arch/barrier.h>
#include <cute/tensor.hpp>

#include "engines/sm90/fwd_params.h"
#include "engines/sm90/gmma_fragment.cuh"

namespace floe::detail::sm90 {

// Named barrier of one consumer warpgroup's epilogue (+ its index), past fwd_mainloop.cuh's.
inline constexpr int kEpilogueBarrier = 3;

template <class T, class AccO, class Softmax>
__device__ __forceinline__ void fwd_epilogue(const FwdParams& p, typename T::SharedStorage& ss,
                                             int ctid, int m0, int h, int b, int sq_b, AccO& acc_o,
                                             const Softmax& softmax) {
  using namespace cute;
  using Element = typename T::Element;
  typename T::MmaPV mma_pv;
  auto thr_pv = mma_pv.get_thread_slice(ctid);
  Tensor tOcO =
      thr_pv.partition_C(make_identity_tensor(cute::Shape<typename T::BM, typename T::Dv>{}));
  auto o = gmma_row_col(acc_o);
  auto oc = gmma_row_col(tOcO);
  constexpr int kRows = decltype(size<0>(o))::value;
  float factor[kRows], lse[kRows];
  if constexpr (T::kScoreMod) {
    // With a softcap the softmax's logits are the scores less lse_shift (the cap; 0 otherwise):
    // given back to the LSE, taken from the sink (fwd_params.h).
    const float sink = p.sink != nullptr ? p.sink[h * p.sink_stride] : 0.f;
    softmax.finalize(score_unit<T::kScoreMod>(p), p.sink != nullptr, sink - p.lse_shift, factor,
                     lse);
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) lse[r] += p.lse_shift;
  } else if constexpr (T::kSink) {  // the sink joins the denominator
    const float sink = p.sink != nullptr ? p.sink[h * p.sink_stride] : 0.f;
    softmax.finalize(score_unit<T::kScoreMod>(p), p.sink != nullptr, sink, factor, lse);
  } else {
    softmax.finalize(p.score.scale_log2, false, 0.f, factor, lse);
  }

  // Registers -> shared: two neighbouring columns a 4-byte store (the swizzle moves 16-byte
  // pieces, so a pair stays contiguous).
  Tensor sO =
      make_tensor(make_smem_ptr(T::kOwnO ? ss.o.data() : ss.q.data()), typename T::SmemLayoutO{});
  const int wg = ctid / 128, tid = ctid % 128;
  // O's own buffer: the warpgroup's previous tile may still be reading its rows (below).
  if constexpr (T::kOwnO) cutlass::arch::NamedBarrier::sync(128, kEpilogueBarrier + wg);
  float* stats_bh =
      p.stats == nullptr ? nullptr : p.stats + b * p.stats_strides.b + h * p.stats_strides.h;
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const int row = get<0>(oc(r, 0));
    const bool valid = m0 + row < sq_b;
    CUTE_UNROLL
    for (int c = 0; c < size<1>(o); c += 2) {
      Element pair[2] = {static_cast<Element>(valid ? o(r, c) * factor[r] : 0.f),
                         static_cast<Element>(valid ? o(r, c + 1) * factor[r] : 0.f)};
      *reinterpret_cast<uint32_t*>(&sO(row, get<1>(oc(r, c)))) = *reinterpret_cast<uint32_t*>(pair);
    }
    if (stats_bh != nullptr && ctid % 4 == 0 && m0 + row < p.s_q) {
      stats_bh[(m0 + row) * p.stats_strides.s] = valid ? lse[r] : -INFINITY;
    }
  }
  cutlass::arch::NamedBarrier::sync(128, kEpilogueBarrier + wg);

  // Shared -> global: this warpgroup's 64 rows, 16 bytes a thread, rows past s_q skipped.
  constexpr int kPieces = T::kDv / 8;  // 16-byte pieces a row
  Element* o_bh = static_cast<Element*>(p.o) + b * p.o_strides.b + h * p.o_strides.h;
  const int row0 = wg * 64;
  static_assert(64 * kPieces % 128 == 0, "whole passes of the warpgroup");
  CUTE_UNROLL
  for (int k = 0; k < 64 * kPieces / 128; ++k) {
    const int i = tid + k * 128;
    const int row = row0 + i / kPieces, col = (i % kPieces) * 8;
    if (m0 + row < p.s_q) {
      *reinterpret_cast<uint4*>(o_bh + (m0 + row) * p.o_strides.s + col) =
          *reinterpret_cast<const uint4*>(&sO(row, col));
    }
  }
}

}  // namespace floe::detail::sm90
