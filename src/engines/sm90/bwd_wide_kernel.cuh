// sm90 backward, main kernel for wide heads (d256; bwd_wide_traits.cuh): one CTA per (key tile of
// 64, kv head, batch), visiting the query tiles as bwd_kernel.cuh's does (the same producer,
// visits and padding rules), with both consumer warpgroups on the same 64 keys. Per visit each
// computes S^T and dP^T for its half of the queries and writes P^T and dS^T to shared memory
// (two buffers, so one named barrier a visit: a warpgroup past the barrier of visit v - 1 knows
// the other has finished visit v - 2's products, the last readers of the buffer it now
// rewrites); then each accumulates dV and dK for its half of d over all the visit's queries and
// computes dQ for that half, which it adds into dq_accum with vector reductions from registers.
// Deterministic mode: a thread of the producer warpgroup waits for the key tile's turn at the
// query tile and says so on an mbarrier, the consumers add once it has and arrive on a second
// one, and the thread passes the turn on (bwd_dq_order.cuh's order; its release is cumulative
// over the reductions the mbarrier ordered before it).
#pragma once

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cute/tensor.hpp>

#include "engines/sm90/bulk_reduce.cuh"
#include "engines/sm90/bwd_dq_order.cuh"
#include "engines/sm90/bwd_kv_epilogue.cuh"
#include "engines/sm90/bwd_params.h"
#include "engines/sm90/bwd_producer.cuh"
#include "engines/sm90/bwd_scores.cuh"
#include "engines/sm90/bwd_wide_traits.cuh"
#include "engines/sm90/gmma_fragment.cuh"
#include "engines/sm90/register_budget.h"
#include "kernels/band_tiles.cuh"
#include "kernels/tile_scheduler.cuh"

namespace floe::detail::sm90 {

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1)
    bwd_wide_kernel(const __grid_constant__ BwdParams p) {
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
    Barrier::init(&ss.turn_ready, 1);
    Barrier::init(&ss.dq_added, T::kConsumerThreads);
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
    } else if (tid == 32 && visits.count > 0 && p.deterministic) {
      // The turn keeper (deterministic mode): per visit it waits for this key tile's turn at the
      // query tile, lets the consumers add, and passes the turn on once all have added. A spin
      // of one consumer thread under the GMMAs instead held ptxas to the launch's 168 registers
      // (the consumers spilled 832 bytes).
      VisitCursor at(visits);
      CUTE_NO_UNROLL
      for (int v = 0; v < visits.count; ++v, at.next(visits)) {
        int32_t* sem = dq_semaphore(p, b, at.h, at.m_block);
        dq_wait_turn(sem, dq_turn<T::kBlockM, T::kBlockN>(p, at.m_block, n_block, sq_b, skv_b));
        Barrier::arrive(&ss.turn_ready);
        Barrier::wait(&ss.dq_added, v & 1);
        dq_pass_turn_after_generic(sem);
      }
    }
    return;
  }

  static_assert(setmaxnreg_fits(T::kThreads, T::kProducerRegs, T::kConsumerRegs),
                "setmaxnreg asks for more registers than the CTA holds");
  cutlass::arch::warpgroup_reg_alloc<T::kConsumerRegs>();
  const int ctid = tid - 128;
  const int wg = ctid / 128;  // its half of the queries (S^T, dP^T) and of d (dK, dV, dQ)
  typename T::MmaSdP mma_sdp;
  typename T::MmadKV mma_dkv;
  typename T::MmadQ mma_dq;
  auto thr_sdp = mma_sdp.get_thread_slice(ctid);
  auto thr_dkv = mma_dkv.get_thread_slice(ctid);
  auto thr_dq = mma_dq.get_thread_slice(ctid);
  Tensor acc_dk = partition_fragment_C(mma_dkv, typename T::TileKV{});
  Tensor acc_dv = partition_fragment_C(mma_dkv, typename T::TileKV{});
  clear(acc_dk);
  clear(acc_dv);
  // (key, query) of each score within the visit's tile.
  Tensor tScS = thr_sdp.partition_C(make_identity_tensor(typename T::TileSdP{}));
  const bool ordered = p.deterministic;

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
    const int buf = v & 1;
    const int m0 = at.m_block * T::kBlockM;
    TxBarrier::wait(&ss.q_full[stage], phase);
    TxBarrier::wait(&ss.do_full[stage], phase);
    if (sq_b - m0 < T::kBlockM && sq_b < p.s_q) {
      constexpr int kStageElems = T::kBlockM * T::kD;
      zero_rows<T::kBlockM, T::kD, T::kConsumerThreads>(ss.q.data() + stage * kStageElems,
                                                        sq_b - m0, ctid);
      zero_rows<T::kBlockM, T::kDv, T::kConsumerThreads>(ss.d_o.data() + stage * kStageElems,
                                                         sq_b - m0, ctid);
      cutlass::arch::fence_view_async_shared();
      cutlass::arch::NamedBarrier::sync(T::kConsumerThreads, kConsumersBarrier);
    }

    // Descriptors rebuilt a visit from addresses the compiler cannot hoist (bwd_kernel.cuh).
    Tensor sQ = make_tensor(make_smem_ptr(opaque(ss.q.data())), typename T::SmemLayoutQ{});
    Tensor sdO = make_tensor(make_smem_ptr(opaque(ss.d_o.data())), typename T::SmemLayoutdO{});
    Tensor sQt = make_tensor(make_smem_ptr(opaque(ss.q.data())), typename T::SmemLayoutQt{});
    Tensor sdOt = make_tensor(make_smem_ptr(opaque(ss.d_o.data())), typename T::SmemLayoutdOt{});
    Tensor sK = make_tensor(make_smem_ptr(opaque(ss.k.data())), typename T::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(opaque(ss.v.data())), typename T::SmemLayoutV{});
    Tensor sPt = make_tensor(make_smem_ptr(opaque(ss.pt.data())), typename T::SmemLayoutPt{});
    Tensor sdSt = make_tensor(make_smem_ptr(opaque(ss.dst.data())), typename T::SmemLayoutPt{});
    Tensor sdS = make_tensor(make_smem_ptr(opaque(ss.dst.data())), typename T::SmemLayoutdS{});

    Tensor acc_s = partition_fragment_C(mma_sdp, typename T::TileSdP{});
    Tensor acc_dp = partition_fragment_C(mma_sdp, typename T::TileSdP{});
    {
      Tensor tSrK = thr_sdp.partition_fragment_A(sK);
      Tensor tSrQ = thr_sdp.partition_fragment_B(sQ);
      Tensor tdPrV = thr_sdp.partition_fragment_A(sV);
      Tensor tdPrdO = thr_sdp.partition_fragment_B(sdO);
      gmma<true>(mma_sdp, tSrK, tSrQ(_, _, _, stage), acc_s);
      gmma<true>(mma_sdp, tdPrV, tdPrdO(_, _, _, stage), acc_dp);
    }
    // P^T (bwd_scores.cuh) while dP^T computes, then dS^T.
    warpgroup_wait<1>();
    Tensor rP = make_tensor<Element>(acc_s.layout());
    bwd::probabilities<T>(p, qt, acc_s, rP, tScS, ss.lse[stage], m0, n0, skv_b);
    warpgroup_wait<0>();
    bwd::scores_gradient(acc_s, acc_dp, tScS, ss.delta[stage]);
    Tensor rdS = make_tensor<Element>(acc_dp.layout());
    CUTE_UNROLL
    for (int i = 0; i < size(acc_s); ++i) {
      if constexpr (!T::kSoftcap) rP(i) = static_cast<Element>(acc_s(i));
      rdS(i) = static_cast<Element>(acc_dp(i));
    }
    {
      // stmatrix through a swizzle-in-the-pointer view (bwd_kernel.cuh: no address kept live).
      typename T::SmemCopyPt r2s;
      auto r2s_thr = r2s.get_thread_slice(ctid);
      Tensor dst_p = r2s_thr.partition_D(as_position_independent_swizzle_tensor(
          make_tensor(make_smem_ptr(ss.pt.data()), typename T::SmemLayoutPt{})));
      Tensor dst_ds = r2s_thr.partition_D(as_position_independent_swizzle_tensor(
          make_tensor(make_smem_ptr(ss.dst.data()), typename T::SmemLayoutPt{})));
      cute::copy(r2s, r2s_thr.retile_S(rP), dst_p(_, _, _, buf));
      cute::copy(r2s, r2s_thr.retile_S(rdS), dst_ds(_, _, _, buf));
    }
    cutlass::arch::fence_view_async_shared();
    cutlass::arch::NamedBarrier::sync(T::kConsumerThreads, kConsumersBarrier);

    // dQ's first pass, dV, dK, then dQ's second pass (GMMA batches complete in order): the first
    // pass's reductions run under dV and dK.
    const int64_t row0 = (static_cast<int64_t>(b) * p.h_q + at.h) * p.s_q_pad + m0;
    float* dq = p.dq_accum + row0 * T::kD + wg * T::kDqHalfFloats + (ctid % 128) * 4;
    Tensor tdQrdS = thr_dq.partition_fragment_A(sdS);
    auto dq_pass = [&](auto& acc, int pass) {
      Tensor sKtH = make_tensor(make_smem_ptr(opaque(ss.k.data() + pass * T::kKtHalfElems)),
                                typename T::SmemLayoutKtHalf{});
      gmma<true>(mma_dq, tdQrdS(_, _, _, buf), thr_dq.partition_fragment_B(sKtH), acc);
    };
    // This warpgroup's values of pass n in fragment order (bwd_wide_traits.cuh), 512 contiguous
    // bytes a warp and reduction.
    auto dq_add = [&](const auto& acc, int pass) {
      constexpr int kPassFrag = T::kDqFrag / T::kDqPasses;
      static_assert(decltype(size(acc))::value == kPassFrag, "dQ fragment size");
      CUTE_UNROLL
      for (int j = 0; j < kPassFrag / 4; ++j) {
        red_add_f32x4(dq + (pass * (kPassFrag / 4) + j) * 512, acc(4 * j), acc(4 * j + 1),
                      acc(4 * j + 2), acc(4 * j + 3));
      }
    };
    Tensor acc_dq = partition_fragment_C(mma_dq, typename T::TileDqPass{});
    dq_pass(acc_dq, 0);
    {
      Tensor tdVrPt = thr_dkv.partition_fragment_A(sPt);
      Tensor tdVrdOt = thr_dkv.partition_fragment_B(sdOt);
      gmma<false>(mma_dkv, tdVrPt(_, _, _, buf), tdVrdOt(_, _, _, stage), acc_dv);
    }
    {
      Tensor tdKrdSt = thr_dkv.partition_fragment_A(sdSt);
      Tensor tdKrQt = thr_dkv.partition_fragment_B(sQt);
      gmma<false>(mma_dkv, tdKrdSt(_, _, _, buf), tdKrQt(_, _, _, stage), acc_dk);
    }
    warpgroup_wait<2>();
    if (ordered) Barrier::wait(&ss.turn_ready, v & 1);
    dq_add(acc_dq, 0);
    Tensor acc_dq1 = partition_fragment_C(mma_dq, typename T::TileDqPass{});
    dq_pass(acc_dq1, 1);
    warpgroup_wait<0>();
    dq_add(acc_dq1, 1);
    if (ordered) Barrier::arrive(&ss.dq_added);
    Barrier::arrive(&ss.q_empty[stage]);
    Barrier::arrive(&ss.do_empty[stage]);
  }

  // dK = scale * dS^T Q and dV, this warpgroup's half of d, rows below s_kv, staged through
  // shared memory (bwd_kv_epilogue.cuh).
  Element* dk = static_cast<Element*>(p.dk) + b * p.dk_strides.b + h_kv * p.dk_strides.h;
  Element* dv = static_cast<Element*>(p.dv) + b * p.dv_strides.b + h_kv * p.dv_strides.h;
  store_dk_dv<T>(p, ss, mma_dkv, acc_dk, mma_dkv, acc_dv, dk, dv, n0, ctid);
#endif
}

}  // namespace floe::detail::sm90
