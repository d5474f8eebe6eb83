// sm90 backward, the bias kernel's own steps (bwd_traits.cuh kBias): the bias tile of a visit
// loaded beside Q, added to S^T, and dBias, which is dS where the bias is not summed over a
// broadcast dim.
//
// The producer (bwd_producer.cuh) loads the visit's bias tile (kBlockM queries x kBlockN keys)
// into the ring stage of its Q, on Q's full barrier, in 64-key boxes laid out as dS's tile is
// ([kBlockN / 64][kBlockM][64], 128-byte swizzle); TMA zero-fills what lies past the tensor. The
// consumers read it in S^T's (key, query) view with ldmatrix.trans: four instructions a thread
// and visit at 64 query rows, where 2-byte loads would be 32.
//
// dBias is the visit's dS, which the consumers already store to shared memory (bf16, [query]
// [key]) as dQ's operand; one thread TMA-stores that tile to dBias once every consumer has
// written it, and waits for the store to have read it before the next visit's dS overwrites it.
// Query tiles a CTA does not visit (outside the band, past the batch's length; every tile where
// the key tile is past the batch's keys) hold a dBias of 0: after the main loop the CTA stores a
// zeroed tile there. A dBias summed over a broadcast dim (the batch, the heads) is instead added
// into an fp32 chunk of the workspace (add_dbias_tile; in deterministic mode in the sum's order,
// bwd_dbias_order.cuh) and written by bwd_dbias_convert.cuh.
// sm_90a device code only.
#pragma once

#include <cstdint>

#include <cutlass/arch/barrier.h>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/tensor.hpp>

#include "engines/sm90/bulk_reduce.cuh"
#include "engines/sm90/bwd_dbias_order.cuh"
#include "engines/sm90/bwd_params.h"
#include "engines/sm90/bwd_producer.cuh"
#include "kernels/band_tiles.cuh"

namespace floe::detail::sm90::bwd {

// This thread's share of stage `stage`'s bias tile in S^T's (key, query) accumulator layout.
template <class T, class Storage, class RBias>
__device__ __forceinline__ void load_bias_tile_t(Storage& ss, int stage, RBias& rBias, int ctid) {
  using namespace cute;
  typename T::SmemCopyBias s2r_bias;
  auto s2r = s2r_bias.get_thread_slice(ctid);
  Tensor sBiasT = as_position_independent_swizzle_tensor(
      make_tensor(make_smem_ptr(ss.bias.data()), typename T::SmemLayoutBiasT{}));
  Tensor src = s2r.partition_S(sBiasT);
  Tensor dst = s2r.retile_D(rBias);
  cute::copy(s2r_bias, src(_, _, _, stage), dst);
}

// acc_s (S^T = K Q^T, raw q.k) += bias / scale, so that the scale in the exponent gives
// q.k * scale + bias (the forward's score-mod kernel adds it in the same unit).
template <class RBias, class AccS>
__device__ __forceinline__ void add_bias(const BwdParams& p, const RBias& rBias, AccS& acc_s) {
  const float unit = p.bias_unit;
  CUTE_UNROLL
  for (int i = 0; i < cute::size(acc_s); ++i) {
    acc_s(i) = fmaf(static_cast<float>(rBias(i)), unit, acc_s(i));
  }
}

// A dBias summed over a broadcast dim: this thread's dS^T (fp32, the visit of head h, batch b at
// tile (m_block, n_block)) added into its tile of the accumulator in fragment order, one 16-byte
// reduction per four values (a warp: 512 contiguous bytes). In no fixed order across CTAs, but
// in deterministic mode in the sum's order: the caller has waited for the pair's turn at the tile
// and passes it on (bwd_dbias_order.cuh).
template <class T, class AccDp>
__device__ __forceinline__ void add_dbias_tile(const BwdParams& p, const AccDp& acc_dp, int h,
                                               int b, int m_block, int n_block, int ctid) {
  const int64_t tile = dbias_tile_index(p, h, b, m_block, n_block);
  float* t = p.dbias_accum + tile * (T::kBlockM * T::kBlockN) + ctid * 4;
  constexpr int kFrag = T::kBlockM * T::kBlockN / T::kConsumerThreads;
  static_assert(kFrag % 4 == 0, "whole float4 chunks");
  CUTE_UNROLL
  for (int j = 0; j < kFrag / 4; ++j) {
    red_add_f32x4(t + j * T::kConsumerThreads * 4, acc_dp(4 * j), acc_dp(4 * j + 1),
                  acc_dp(4 * j + 2), acc_dp(4 * j + 3));
  }
}

// The TMA stores of dS's shared-memory tile (or a zeroed one) to dBias at (queries m0.., keys
// n0..) of head h, batch b, one 64-key box each; TMA leaves out what lies past the tensor. The
// caller commits the bulk group.
template <class T, class Storage>
__device__ __forceinline__ void store_dbias_boxes(const BwdParams& p, Storage& ss, int m0, int n0,
                                                  int h, int b) {
  CUTE_UNROLL
  for (int c = 0; c < T::kBlockN / 64; ++c) {
    cute::SM90_TMA_STORE_4D::copy(&p.tma_dbias, ss.ds.data() + c * T::kBlockM * 64, n0 + 64 * c, m0,
                                  h * p.dbias_h_step, b * p.dbias_b_step);
  }
}

// One thread, once every consumer has written and fenced the visit's dS tile: dS to dBias.
template <class T, class Storage>
__device__ __forceinline__ void store_dbias_tile(const BwdParams& p, Storage& ss, int m0, int n0,
                                                 int h, int b) {
  store_dbias_boxes<T>(p, ss, m0, n0, h, b);
  bulk_commit_group();
}

// After the main loop, every consumer thread: zeros to the dBias tiles of this key tile that the
// CTA did not visit, every query head of its group, from a zeroed dS tile. ctid 0 issued the
// loop's stores; it waits for them to have read the tile before anyone zeroes it, and for every
// store to have completed before the CTA's shared memory goes.
template <class T, class Storage>
__device__ __forceinline__ void zero_unvisited_dbias(const BwdParams& p, Storage& ss,
                                                     const kernels::QueryTiles& qt, int n0,
                                                     int h_kv, int b, int ctid) {
  if (ctid == 0) bulk_wait_group_read<0>();
  cutlass::arch::NamedBarrier::sync(T::kConsumerThreads, kConsumersBarrier);
  zero_rows<T::kBlockM, T::kBlockN, T::kConsumerThreads>(ss.ds.data(), 0, ctid);
  cutlass::arch::fence_view_async_shared();
  cutlass::arch::NamedBarrier::sync(T::kConsumerThreads, kConsumersBarrier);
  if (ctid != 0) return;
  for (int g = 0; g < p.group; ++g) {
    const int h = h_kv * p.group + g;
    for (int m_block = 0; m_block < p.num_m_blocks; ++m_block) {
      if (!qt.empty() && m_block >= qt.begin && m_block < qt.end) continue;
      store_dbias_boxes<T>(p, ss, m_block * T::kBlockM, n0, h, b);
    }
  }
  bulk_commit_group();
  bulk_wait_group<0>();
}

}  // namespace floe::detail::sm90::bwd
