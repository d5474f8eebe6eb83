// sm90 forward: the epilogue of one consumer warpgroup. Normalises O (in the score-mod kernel the
// sink joins the denominator), zeroes rows past the batch's query length, writes the stats
// (natural-log LSE, fp32) through their strides, and writes O as f16/bf16 through its strides:
// registers -> the warpgroup's own rows of the Q tile in shared memory (only its own products read
// them, and they are done) -> 16-byte stores, a row's bytes by neighbouring threads. The serving
// kernel writes a ragged slot's rows (rows->q0 on, rows->q_rows of them: padding inside the slot
// gets O = 0 and stats = -inf, nothing past the slot is touched), and the head's last query tile
// also the slot's rows past the envelope, which no tile covers (DESIGN 2.1).
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
                                             const Softmax& softmax,
                                             const kernels::BatchRows* rows = nullptr) {
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
  // The rows written: the envelope's (dense), or the slot's (serving: from its first token; the
  // batch strides are 0).
  const int row_end = T::kServing ? rows->q_rows : p.s_q;
  const int64_t first_row = T::kServing ? rows->q0 : 0;
  float* stats_bh = p.stats == nullptr ? nullptr
                                       : p.stats + b * p.stats_strides.b + h * p.stats_strides.h +
                                             first_row * p.stats_strides.s;
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
    if (stats_bh != nullptr && ctid % 4 == 0 && m0 + row < row_end) {
      stats_bh[(m0 + row) * p.stats_strides.s] = valid ? lse[r] : -INFINITY;
    }
  }
  cutlass::arch::NamedBarrier::sync(128, kEpilogueBarrier + wg);

  // Shared -> global: this warpgroup's 64 rows, 16 bytes a thread, rows past s_q skipped.
  constexpr int kPieces = T::kDv / 8;  // 16-byte pieces a row
  Element* o_bh = static_cast<Element*>(p.o) + b * p.o_strides.b + h * p.o_strides.h +
                  first_row * p.o_strides.s;
  const int row0 = wg * 64;
  static_assert(64 * kPieces % 128 == 0, "whole passes of the warpgroup");
  CUTE_UNROLL
  for (int k = 0; k < 64 * kPieces / 128; ++k) {
    const int i = tid + k * 128;
    const int row = row0 + i / kPieces, col = (i % kPieces) * 8;
    if (m0 + row < row_end) {
      *reinterpret_cast<uint4*>(o_bh + (m0 + row) * p.o_strides.s + col) =
          *reinterpret_cast<const uint4*>(&sO(row, col));
    }
  }

  if constexpr (T::kServing) {
    // A slot wider than the envelope: its rows past s_q are padding that no tile covers (O = 0,
    // stats = -inf), written by the head's last query tile, every consumer thread a share.
    if (rows->q_slot > p.s_q && m0 + T::kBlockM >= p.s_q) {
      constexpr int kChunks = T::kDv / 8;  // 16-byte pieces of a row
      Element* o_h = static_cast<Element*>(p.o) + h * p.o_strides.h;
      const int64_t first = rows->q0 + p.s_q;
      const int64_t n = static_cast<int64_t>(rows->q_slot - p.s_q) * kChunks;
      for (int64_t x = ctid; x < n; x += T::kConsumerThreads) {
        const int64_t t = first + x / kChunks;
        *reinterpret_cast<uint4*>(o_h + t * p.o_strides.s + (x % kChunks) * 8) =
            make_uint4(0, 0, 0, 0);
        if (p.stats != nullptr && x % kChunks == 0) {
          p.stats[h * p.stats_strides.h + t * p.stats_strides.s] = -INFINITY;
        }
      }
    }
  }
}

}  // namespace floe::detail::sm90
