// sm80 forward: the epilogue of one CTA. Normalises O (softmax denominator with the sink), zeroes
// rows past the batch's query length, writes the stats through their strides, and writes O as
// f16/bf16 through its strides: registers -> shared (Q's buffer) -> 16-byte stores, skipping rows
// past s_q and columns past d_v.
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm80/fwd_params.h"
#include "kernels/constants.h"
#include "kernels/sm80/fragment.cuh"
#include "kernels/tile_scheduler.cuh"

namespace floe::detail::sm80 {

// kServing: the rows written are the slot's (rows.q0 on, rows.q_rows of them; O's and the
// stats' batch strides are 0 on a ragged side), and the last query tile also zeroes a slot's
// rows past the envelope.
// kHalfTanh: the softmax saw the softcap kind's logits less cap_log2 (fwd_kernel.cuh).
template <class T, bool kServing, bool kHalfTanh, class AccO, class Softmax>
__device__ __forceinline__ void fwd_epilogue(const FwdParams& p, char* smem, int tid,
                                             const kernels::QueryTile& tile, int sq_b, AccO& acc_o,
                                             const Softmax& softmax, float scale_log2,
                                             const kernels::BatchRows& rows) {
  using namespace cute;
  using Element = typename T::Element;
  using BM = Int<T::kBlockM>;
  using DV = Int<T::kDv>;
  constexpr int kRows = decltype(size<0>(kernels::acc_row_col_layout(acc_o.layout())))::value;

  float factor[kRows], lse[kRows];
  const float sink = p.sink != nullptr ? p.sink[tile.h * p.sink_stride] : 0.f;
  if constexpr (kHalfTanh) {
    // The softmax's logits were the scores less the softcap (cap_log2 in log2 units).
    const float cap = p.score.cap_log2 * kernels::kLn2;
    softmax.finalize(scale_log2, p.sink != nullptr, sink - cap, factor, lse);
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) lse[r] += cap;
  } else {
    softmax.finalize(scale_log2, p.sink != nullptr, sink, factor, lse);
  }

  const int m0 = tile.m_block * T::kBlockM;
  typename T::TiledMma mma;
  auto thr_mma = mma.get_thread_slice(tid);
  Tensor tOcO = thr_mma.partition_C(make_identity_tensor(cute::Shape<BM, DV>{}));
  auto o = kernels::acc_row_col(acc_o);
  auto oc = kernels::acc_row_col(tOcO);
  if (m0 + T::kBlockM <= sq_b) {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      CUTE_UNROLL
      for (int c = 0; c < size<1>(o); ++c) o(r, c) *= factor[r];
    }
  } else {  // rows past the batch's query length: a select, so no NaN leaks into them
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const bool valid = m0 + get<0>(oc(r, 0)) < sq_b;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(o); ++c) o(r, c) = valid ? o(r, c) * factor[r] : 0.f;
    }
  }

  if (p.stats != nullptr && tid % 4 == 0) {  // one lane of the quad that shares a row
    float* stats_bh = p.stats + tile.b * p.stats_strides.b + tile.h * p.stats_strides.h +
                      (kServing ? rows.q0 * p.stats_strides.s : 0);
    const int stats_rows = kServing ? rows.q_rows : p.s_q;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const int row = m0 + get<0>(oc(r, 0));
      if (row < stats_rows) stats_bh[row * p.stats_strides.s] = row < sq_b ? lse[r] : -INFINITY;
    }
  }

  Tensor rO = kernels::convert_fragment<Element>(acc_o);
  Tensor sO =
      make_tensor(make_smem_ptr(reinterpret_cast<Element*>(smem)), typename T::SmemLayoutO{});
  auto o_copy = make_tiled_copy_C(typename T::SmemStoreAtomO{}, mma);
  auto o_thr = o_copy.get_thread_slice(tid);
  Tensor tRo = o_thr.retile_S(rO);
  Tensor tSo = o_thr.partition_D(sO);
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with Q's buffer
  copy(o_copy, tRo, tSo);
  __syncthreads();

  Element* o_tile = static_cast<Element*>(p.o) + tile.b * p.o_strides.b + tile.h * p.o_strides.h +
                    ((kServing ? rows.q0 : 0) + m0) * p.o_strides.s;
  Tensor gO = make_tensor(
      make_gmem_ptr(o_tile),
      make_layout(cute::Shape<BM, DV>{}, make_stride(static_cast<int>(p.o_strides.s), _1{})));
  typename T::GmemStore gmem_store;
  auto gthr = gmem_store.get_thread_slice(tid);
  Tensor tOs = gthr.partition_S(sO);
  Tensor tOg = gthr.partition_D(gO);
  Tensor tOc = gthr.partition_D(make_identity_tensor(cute::Shape<BM, DV>{}));
  const int row_limit = (kServing ? rows.q_rows : p.s_q) - m0;
  CUTE_UNROLL
  for (int m = 0; m < size<1>(tOg); ++m) {
    if (get<0>(tOc(0, m, 0)) < row_limit) {
      CUTE_UNROLL
      for (int k = 0; k < size<2>(tOg); ++k) {
        if (get<1>(tOc(0, m, k)) < p.d_v) copy(gmem_store, tOs(_, m, k), tOg(_, m, k));
      }
    }
  }

  if constexpr (kServing) {
    // A ragged slot wider than the envelope: its rows past s_q are padding no tile covers
    // (DESIGN 2.1: O = 0, stats = -inf), zeroed by the head's last query tile.
    if (rows.q_slot > p.s_q && m0 + T::kBlockM >= p.s_q) {
      Element* o_bh = static_cast<Element*>(p.o) + tile.h * p.o_strides.h;
      const int64_t first = rows.q0 + p.s_q;
      const int chunks = p.d_v / 8;  // 16-byte chunks of a row (d_v is a multiple of 8)
      const int64_t n = static_cast<int64_t>(rows.q_slot - p.s_q) * chunks;
      for (int64_t x = tid; x < n; x += T::kThreads) {
        const int64_t t = first + x / chunks;
        *reinterpret_cast<uint4*>(o_bh + t * p.o_strides.s + (x % chunks) * 8) =
            make_uint4(0, 0, 0, 0);
        if (p.stats != nullptr && x % chunks == 0) {
          p.stats[tile.h * p.stats_strides.h + t * p.stats_strides.s] = -INFINITY;
        }
      }
    }
  }
}

}  // namespace floe::detail::sm80
