// sm90 backward, main kernel: one CTA per (key tile, kv head, batch), key tile fastest. K and V
// stay in shared memory, dK and dV in registers; the CTA visits every query tile of every query
// head of its kv group that sees one of its keys, so GQA accumulates at h_kv.
//
// Warpgroup 0 produces (bwd_producer.cuh: K and V once, then each visit's Q, dO and their row
// stats into a kStages ring). Consumer warpgroups (64 keys each) run the five
// products of bwd_traits.cuh per visit and store their share of dQ in shared memory; one thread
// of warp 1 (the dQ reducer) adds each share into the fp32 accumulator with one bulk reduce-add
// and hands the buffer back once the copy has read it; in deterministic mode it adds a query
// tile's share only in its key tile's turn (bwd_dq_order.cuh). dK and dV go out from registers at
// the end. The bias kernel (bwd_bias.cuh) adds a bias tile a visit to S^T and stores dS as dBias
// (or adds it into a summed dBias, in deterministic mode in the sum's order, whose turns warp 2
// keeps: bwd_dbias_order.cuh).
//
// Padding rows (past the batch's length but inside the tensor) hold whatever the tensor holds
// there; TMA zero-fills only past the tensor. The consumers zero them in shared memory (K and V
// once, Q and dO on the one query tile that has them), so every product sees finite values and a
// P of 0 gives a dS of 0. Built for sm_90a only (empty in other device passes).
#pragma once

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/tensor.hpp>

#include "engines/sm90/bulk_reduce.cuh"
#include "engines/sm90/bwd_bias.cuh"
#include "engines/sm90/bwd_dq_order.cuh"
#include "engines/sm90/bwd_kv_epilogue.cuh"
#include "engines/sm90/bwd_params.h"
#include "engines/sm90/bwd_producer.cuh"
#include "engines/sm90/bwd_scores.cuh"
#include "engines/sm90/bwd_traits.cuh"
#include "engines/sm90/gmma_fragment.cuh"
#include "engines/sm90/register_budget.h"
#include "kernels/band_tiles.cuh"
#include "kernels/tile_scheduler.cuh"

namespace floe::detail::sm90 {

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1) bwd_kernel(const __grid_constant__ BwdParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace cute;
  using namespace bwd;
  using Element = typename T::Element;
  extern __shared__ __align__(1024) char smem[];
  auto& ss = *reinterpret_cast<typename T::SharedStorage*>(smem);
  const int tid = static_cast<int>(threadIdx.x);
  const int warpgroup = tid / 128;
  constexpr int kStages = T::kStages;

  if (tid == 0) {
    init_ring_barriers<T>(ss);
    CUTE_UNROLL
    for (int w = 0; w < T::kConsumerWarpgroups; ++w) {
      Barrier::init(&ss.dq_full[w], 128);
      Barrier::init(&ss.dq_empty[w], 1);
    }
    if constexpr (T::kBias) Barrier::init(&ss.dbias_turn, 1);
    cutlass::arch::fence_barrier_init();
  }

  const KeyTileVisits kt = key_tile_visits<T>(p);
  const int n_block = kt.tile.n_block, h_kv = kt.tile.h_kv, b = kt.tile.b;
  const int sq_b = kt.sq_b, skv_b = kt.skv_b, n0 = kt.n0;
  const kernels::QueryTiles qt = kt.qt;
  const Visits visits = kt.visits;
  __syncthreads();  // the barriers are initialised

  if (warpgroup == 0) {
    cutlass::arch::warpgroup_reg_dealloc<T::kProducerRegs>();
    if (tid == 0 && visits.count > 0) {
      produce_visits<T>(p, ss, visits, n0, h_kv, b);
    } else if (tid == 32 && visits.count > 0) {
      // The dQ reducer: each warpgroup's share of a visit, once its threads have stored and
      // fenced it, is added into the tile of dq_accum (same fragment order, contiguous); the
      // buffer goes back to the warpgroup as soon as the copy has read it. Deterministic mode
      // (bwd_dq_order.cuh): first wait for this key tile's turn at the query tile (while the
      // consumers still compute), and pass the turn on once the adds have completed.
      constexpr int kHalf = T::kDqHalfFloats;
      const bool ordered = p.deterministic;
      VisitCursor at(visits);
      CUTE_NO_UNROLL
      for (int v = 0; v < visits.count; ++v, at.next(visits)) {
        const int64_t row0 =
            (static_cast<int64_t>(b) * p.h_q + at.h) * p.s_q_pad + at.m_block * T::kBlockM;
        float* tile = p.dq_accum + row0 * T::kD;
        if (ordered) {
          dq_wait_turn(dq_semaphore(p, b, at.h, at.m_block),
                       dq_turn<T::kBlockM, T::kBlockN>(p, at.m_block, n_block, sq_b, skv_b));
        }
        CUTE_UNROLL
        for (int w = 0; w < T::kConsumerWarpgroups; ++w) {
          Barrier::wait(&ss.dq_full[w], v & 1);
          bulk_reduce_add_f32(tile + w * kHalf, ss.dq + w * kHalf, kHalf * sizeof(float));
          bulk_commit_group();
        }
        bulk_wait_group_read<0>();
        CUTE_UNROLL
        for (int w = 0; w < T::kConsumerWarpgroups; ++w) Barrier::arrive(&ss.dq_empty[w]);
        if (ordered) {
          bulk_wait_group<0>();
          dq_pass_turn(dq_semaphore(p, b, at.h, at.m_block));
        }
      }
      bulk_wait_group<0>();  // the last adds written before the CTA's smem goes
    } else if constexpr (T::kBias) {
      // Warp 2, deterministic mode with a summed dBias: the sum's turns (bwd_dbias_order.cuh),
      // also where the CTA visits nothing.
      if (tid / 32 == 2 && p.dbias_sem != nullptr) {
        keep_dbias_turns<T::kConsumerThreads>(p, &ss.dbias_turn, visits, qt, n_block, h_kv, b,
                                              tid % 32);
      }
    }
    return;
  }

  static_assert(setmaxnreg_fits(T::kThreads, T::kProducerRegs, T::kConsumerRegs),
                "setmaxnreg asks for more registers than the CTA holds");
  cutlass::arch::warpgroup_reg_alloc<T::kConsumerRegs>();
  const int ctid = tid - 128;
  // Deterministic mode with a summed dBias: the sum's turns (bwd_dbias_order.cuh).
  const bool dbias_ordered = T::kBias && p.dbias_sem != nullptr;
  typename T::MmaSdP mma_sdp;
  typename T::MmadKV mma_dkv;
  typename T::MmadV mma_dv;
  typename T::MmadQ mma_dq;
  auto thr_sdp = mma_sdp.get_thread_slice(ctid);
  auto thr_dkv = mma_dkv.get_thread_slice(ctid);
  auto thr_dv = mma_dv.get_thread_slice(ctid);
  auto thr_dq = mma_dq.get_thread_slice(T::kDqThirds ? ctid % 128 : ctid);
  using TileSdP = cute::Shape<typename T::BN, typename T::BM>;
  using TileKV = cute::Shape<typename T::BN, typename T::D>;
  using TileV = cute::Shape<typename T::BN, typename T::Dv>;
  Tensor acc_dk = partition_fragment_C(mma_dkv, TileKV{});
  Tensor acc_dv = partition_fragment_C(mma_dv, TileV{});
  clear(acc_dk);
  clear(acc_dv);
  // (key, query) of each score within the tile.
  Tensor tScS = thr_sdp.partition_C(make_identity_tensor(TileSdP{}));
  const int dq_wg = ctid / 128;
  float4* dq_out = reinterpret_cast<float4*>(ss.dq + dq_wg * T::kDqHalfFloats) + ctid % 128;

  if (visits.count > 0) {
    TxBarrier::wait(&ss.kv_full, 0);
    if (skv_b - n0 < T::kBlockN && skv_b < p.s_kv) {
      zero_rows<T::kBlockN, T::kD, T::kConsumerThreads>(ss.k.data(), skv_b - n0, ctid);
      zero_rows<T::kBlockN, T::kDv, T::kConsumerThreads>(ss.v.data(), skv_b - n0, ctid);
      cutlass::arch::fence_view_async_shared();
      cutlass::arch::NamedBarrier::sync(T::kConsumerThreads, kConsumersBarrier);
    }
  }

  VisitCursor at(visits);
  CUTE_NO_UNROLL
  for (int v = 0; v < visits.count; ++v, at.next(visits)) {
    const int stage = v % kStages;
    const uint32_t phase = (v / kStages) & 1;
    const int m0 = at.m_block * T::kBlockM;
    // Deterministic summed dBias: the pair's turn at the visit's tile, which the turn keeper
    // waited for while the visit before ran (bwd_dbias_order.cuh). Here, before the products:
    // waited just before the reductions, with S^T and dP^T live, it made ptxas spill 96 bytes a
    // thread at d64 (16 here).
    if (dbias_ordered) Barrier::wait(&ss.dbias_turn, v & 1);
    TxBarrier::wait(&ss.q_full[stage], phase);
    TxBarrier::wait(&ss.do_full[stage], phase);
    if (sq_b - m0 < T::kBlockM && sq_b < p.s_q) {
      constexpr int kStageElems = T::kBlockM * T::kD;
      constexpr int kDoStageElems = T::kBlockM * T::kDv;
      zero_rows<T::kBlockM, T::kD, T::kConsumerThreads>(ss.q.data() + stage * kStageElems,
                                                        sq_b - m0, ctid);
      zero_rows<T::kBlockM, T::kDv, T::kConsumerThreads>(ss.d_o.data() + stage * kDoStageElems,
                                                         sq_b - m0, ctid);
      // The bias kernel: a padding row's bias may be anything (+inf, NaN), which the zero q.k
      // would not hide from P (2^(b - inf) is NaN for b = +inf): zero as well.
      if constexpr (T::kBias) {
        zero_rows<T::kBlockM, T::kBlockN, T::kConsumerThreads>(
            ss.bias.data() + stage * (T::kBlockM * T::kBlockN), sq_b - m0, ctid);
      }
      cutlass::arch::fence_view_async_shared();
      cutlass::arch::NamedBarrier::sync(T::kConsumerThreads, kConsumersBarrier);
    }

    // The GMMA descriptors of the visit, built from shared-memory addresses the compiler cannot
    // hoist out of the loop: kept live across it, the ~80 of them spilled (396 bytes at 240
    // registers).
    Tensor sQ = make_tensor(make_smem_ptr(opaque(ss.q.data())), typename T::SmemLayoutQ{});
    Tensor sdO = make_tensor(make_smem_ptr(opaque(ss.d_o.data())), typename T::SmemLayoutdO{});
    Tensor sQt = make_tensor(make_smem_ptr(opaque(ss.q.data())), typename T::SmemLayoutQt{});
    Tensor sdOt = make_tensor(make_smem_ptr(opaque(ss.d_o.data())), typename T::SmemLayoutdOt{});
    Tensor sK = make_tensor(make_smem_ptr(opaque(ss.k.data())), typename T::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(opaque(ss.v.data())), typename T::SmemLayoutV{});
    Tensor sKt = make_tensor(make_smem_ptr(opaque(ss.k.data())), typename T::SmemLayoutKt{});
    Tensor sdS = make_tensor(make_smem_ptr(opaque(ss.ds.data())), typename T::SmemLayoutdS{});
    Tensor tSrK = thr_sdp.partition_fragment_A(sK);     // S^T: A = K
    Tensor tSrQ = thr_sdp.partition_fragment_B(sQ);     // S^T: B = Q (stage)
    Tensor tdPrV = thr_sdp.partition_fragment_A(sV);    // dP^T: A = V
    Tensor tdPrdO = thr_sdp.partition_fragment_B(sdO);  // dP^T: B = dO (stage)
    Tensor tdVrdOt = thr_dv.partition_fragment_B(sdOt);
    Tensor tdKrQt = thr_dkv.partition_fragment_B(sQt);

    Tensor acc_s = partition_fragment_C(mma_sdp, TileSdP{});
    Tensor acc_dp = partition_fragment_C(mma_sdp, TileSdP{});
    gmma<true>(mma_sdp, tSrK, tSrQ(_, _, _, stage), acc_s);
    gmma<true>(mma_sdp, tdPrV, tdPrdO(_, _, _, stage), acc_dp);

    // P^T (bwd_scores.cuh) while dP^T computes; the bias kernel's bias tile read while S^T does.
    Tensor rBias = make_tensor<Element>(acc_s.layout());
    if constexpr (T::kBias) bwd::load_bias_tile_t<T>(ss, stage, rBias, ctid);
    warpgroup_wait<1>();
    if constexpr (T::kBias) bwd::add_bias(p, rBias, acc_s);
    Tensor rP = make_tensor<Element>(acc_s.layout());
    bwd::probabilities<T>(p, qt, acc_s, rP, tScS, ss.lse[stage], m0, n0, skv_b);
    warpgroup_wait<0>();
    bwd::scores_gradient(acc_s, acc_dp, tScS, ss.delta[stage]);
    if constexpr (T::kBias) {
      if (p.dbias_accum != nullptr) {
        // Deterministic: the turn keeper passes the turn once every consumer has arrived after
        // its reductions (bwd_dbias_order.cuh).
        bwd::add_dbias_tile<T>(p, acc_dp, at.h, b, at.m_block, n_block, ctid);
        if (dbias_ordered) {
          cutlass::arch::NamedBarrier::arrive(T::kConsumerThreads + 32, bwd::kDbiasAddedBarrier);
        }
      }
    }
    Tensor rdS = make_tensor<Element>(acc_dp.layout());
    CUTE_UNROLL
    for (int i = 0; i < size(acc_s); ++i) {
      if constexpr (!T::kSoftcap) rP(i) = static_cast<Element>(acc_s(i));
      rdS(i) = static_cast<Element>(acc_dp(i));
    }
    Tensor tdVrP = make_tensor(rP.data(), gmma_acc_as_a_layout(rP.layout()));
    Tensor tdKrdS = make_tensor(rdS.data(), gmma_acc_as_a_layout(rdS.layout()));
    warpgroup_fence_operand(rP);
    warpgroup_fence_operand(rdS);
    gmma<false>(mma_dv, tdVrP, tdVrdOt(_, _, _, stage), acc_dv);
    if constexpr (!T::kDqBeforeDk) gmma<false>(mma_dkv, tdKrdS, tdKrQt(_, _, _, stage), acc_dk);

    // dS to shared memory for dQ = dS K (under the dV and dK products), once the previous
    // visit's dQ product has read it (with two dS buffers, the barrier of the visit before
    // already says so). kOverlapDq: dQ is issued while dV and dK are in flight (more registers
    // live; 7% faster on the H200 in B1, when both variants spilled); else only once they are
    // done, so that P and dS in registers are dead while its accumulator lives.
    // The bias kernel: the previous visit's dBias store has read dS's tile too.
    if constexpr (T::kBias) {
      if (p.has_dbias && ctid == 0) bulk_wait_group_read<0>();
    }
    if constexpr (!T::kDoubleBufferDs) {
      cutlass::arch::NamedBarrier::sync(T::kConsumerThreads, kConsumersBarrier);
    }
    const int ds_buf = T::kDoubleBufferDs ? (v & 1) : 0;
    {
      // Through a swizzle-in-the-pointer view, so that the four stmatrix addresses are the
      // thread's base XOR constants (element-wise stores through the swizzled layout each kept
      // a precomputed 64-bit address live, and those spilled).
      typename T::SmemCopydS r2s_ds;
      auto r2s = r2s_ds.get_thread_slice(ctid);
      Tensor sdSt = as_position_independent_swizzle_tensor(
          make_tensor(make_smem_ptr(ss.ds.data()), typename T::SmemLayoutdSt{}));
      Tensor dst = r2s.partition_D(sdSt);
      Tensor src = r2s.retile_S(rdS);
      cute::copy(r2s_ds, src, dst(_, _, _, ds_buf));
    }
    cutlass::arch::fence_view_async_shared();
    if constexpr (!T::kOverlapDq) {
      warpgroup_wait<0>();
      warpgroup_fence_operand(rP);
      warpgroup_fence_operand(rdS);
    }
    cutlass::arch::NamedBarrier::sync(T::kConsumerThreads, kConsumersBarrier);
    if constexpr (T::kBias) {
      if (p.has_dbias && ctid == 0) bwd::store_dbias_tile<T>(p, ss, m0, n0, at.h, b);
    }
    Tensor acc_dq = partition_fragment_C(mma_dq, typename T::TileDq{});
    // kDqThirds: acc_dq is this warpgroup's own 64-column chunk, acc_dq_half its half of the
    // third (bwd_traits.cuh); other tiles leave acc_dq_half unused.
    typename T::MmadQHalf mma_dq_half;
    Tensor acc_dq_half = partition_fragment_C(mma_dq_half, typename T::TileDqHalf{});
    if constexpr (T::kDqThirds) {
      constexpr int kChunkElems = T::kBlockN * 64;
      Element* ds = ss.ds.data() + ds_buf * (T::kBlockM * T::kBlockN);
      Tensor sKtW = make_tensor(make_smem_ptr(opaque(ss.k.data() + dq_wg * kChunkElems)),
                                typename T::SmemLayoutKtChunk{});
      Tensor sKtH = make_tensor(make_smem_ptr(opaque(ss.k.data() + 2 * kChunkElems)),
                                typename T::SmemLayoutKtChunk{});
      Tensor sdSW = make_tensor(make_smem_ptr(opaque(ds)), typename T::SmemLayoutdS{});
      Tensor sdSH = make_tensor(make_smem_ptr(opaque(ds + dq_wg * (T::kBlockM / 2) * 64)),
                                typename T::SmemLayoutdSHalf{});
      auto thr_h = mma_dq_half.get_thread_slice(ctid % 128);
      Tensor tWrKt = thr_dq.partition_fragment_A(sKtW);
      Tensor tWrdS = thr_dq.partition_fragment_B(sdSW(_, _, 0));
      Tensor tHrKt = thr_h.partition_fragment_A(sKtH);
      Tensor tHrdS = thr_h.partition_fragment_B(sdSH);
      gmma<true>(mma_dq, tWrKt, tWrdS, acc_dq);
      gmma<true>(mma_dq_half, tHrKt, tHrdS, acc_dq_half);
    } else if constexpr (T::kDqSwapAB) {
      Tensor tdQrKt = thr_dq.partition_fragment_A(sKt);
      Tensor tdQrdS = thr_dq.partition_fragment_B(sdS);
      gmma<true>(mma_dq, tdQrKt, tdQrdS(_, _, _, ds_buf), acc_dq);
    } else {
      Tensor tdQrdS = thr_dq.partition_fragment_A(sdS);
      Tensor tdQrKt = thr_dq.partition_fragment_B(sKt);
      gmma<true>(mma_dq, tdQrdS(_, _, _, ds_buf), tdQrKt, acc_dq);
    }
    // kDqBeforeDk: dK is issued behind dQ, and dQ goes to shared memory while dK computes
    // (GMMA batches complete in order: wait<1> leaves only dK in flight).
    if constexpr (T::kDqBeforeDk) {
      gmma<false>(mma_dkv, tdKrdS, tdKrQt(_, _, _, stage), acc_dk);
      warpgroup_wait<1>();
    } else {
      warpgroup_wait<0>();
    }

    // This warpgroup's dQ to its buffer in fragment order (bwd_traits.cuh), once the reducer has
    // read the previous visit's; then fenced for the bulk copy's async proxy.
    Barrier::wait(&ss.dq_empty[dq_wg], (v & 1) ^ 1);
    if constexpr (T::kDqThirds) {  // the order dq_third_coord reads
      constexpr int kW = decltype(size(acc_dq))::value;
      static_assert(kW + decltype(size(acc_dq_half))::value == T::kDqFrag, "dQ fragment size");
      CUTE_UNROLL
      for (int j = 0; j < kW / 4; ++j) {
        dq_out[j * 128] =
            make_float4(acc_dq(4 * j), acc_dq(4 * j + 1), acc_dq(4 * j + 2), acc_dq(4 * j + 3));
      }
      CUTE_UNROLL
      for (int j = 0; j < (T::kDqFrag - kW) / 4; ++j) {
        dq_out[(kW / 4 + j) * 128] = make_float4(acc_dq_half(4 * j), acc_dq_half(4 * j + 1),
                                                 acc_dq_half(4 * j + 2), acc_dq_half(4 * j + 3));
      }
    } else {
      static_assert(decltype(size(acc_dq))::value == T::kDqFrag, "dQ fragment size");
      CUTE_UNROLL
      for (int j = 0; j < T::kDqFrag / 4; ++j) {
        dq_out[j * 128] =
            make_float4(acc_dq(4 * j), acc_dq(4 * j + 1), acc_dq(4 * j + 2), acc_dq(4 * j + 3));
      }
    }
    cutlass::arch::fence_view_async_shared();
    Barrier::arrive(&ss.dq_full[dq_wg]);

    if constexpr (T::kDqBeforeDk) warpgroup_wait<0>();
    if constexpr (T::kOverlapDq || T::kDqBeforeDk) {
      warpgroup_fence_operand(rP);
      warpgroup_fence_operand(rdS);
    }
    Barrier::arrive(&ss.q_empty[stage]);
    Barrier::arrive(&ss.do_empty[stage]);
  }

  // dK = scale * dS^T Q and dV, rows below s_kv (the batch's padding rows get zeros), staged
  // through shared memory (bwd_kv_epilogue.cuh).
  Element* dk = static_cast<Element*>(p.dk) + b * p.dk_strides.b + h_kv * p.dk_strides.h;
  Element* dv = static_cast<Element*>(p.dv) + b * p.dv_strides.b + h_kv * p.dv_strides.h;
  store_dk_dv<T>(p, ss, mma_dkv, acc_dk, mma_dv, acc_dv, dk, dv, n0, ctid);
  if constexpr (T::kBias) {
    if (p.has_dbias) bwd::zero_unvisited_dbias<T>(p, ss, qt, n0, h_kv, b, ctid);
  }
#endif
}

}  // namespace floe::detail::sm90
