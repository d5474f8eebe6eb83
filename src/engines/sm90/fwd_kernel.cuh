// sm90 forward: the kernel. Each CTA walks the query tiles (query tile, head, batch) the
// persistent scheduler gives it (kernels/tile_scheduler.cuh): one each when the grid has a CTA
// per tile, several when the grid is the SM count. Three warpgroups (four at d64): warpgroup 0
// produces (one thread issues every TMA; its registers drop to kProducerRegs), the others consume
// (kConsumerRegs each), 64 query rows each. Lengths are the batch's actual ones, read on the
// device (P6); a tile whose rows are all past the batch's query length, or that sees no key, loads
// nothing and writes O = 0 and its stats. The serving kernel (T::kServing: ragged sides, DESIGN
// 2.1) reads each batch's slot from its offsets (kernels/sm80/serving_rows.h): its tiles load rows
// at the slot's first token, and write only the slot's rows, so a tile past a short slot writes
// nothing.
//
// Across a CTA's tiles the K and V rings keep turning (both roles count the key tiles they have
// passed), so the producer loads the next tile's first K and V while the consumers finish the
// previous tile; the Q buffer has a full and an empty barrier, released once the tile's products
// are done where the epilogue stages O in a buffer of its own (else after the epilogue).
//
// Built for sm_90a only: the body is compiled where the arch-specific features exist
// (__CUDA_ARCH_FEAT_SM90_ALL) and is empty in any other device pass, so that the build's other
// targets (sm_80) compile this file to nothing.
#pragma once

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cute/tensor.hpp>

#include "engines/sm90/fwd_epilogue.cuh"
#include "engines/sm90/fwd_mainloop.cuh"
#include "engines/sm90/fwd_params.h"
#include "engines/sm90/fwd_traits.cuh"
#include "engines/sm90/register_budget.h"
#include "kernels/band_tiles.cuh"
#include "kernels/online_softmax.cuh"
#include "kernels/tile_scheduler.cuh"

namespace floe::detail::sm90 {

using FwdScheduler = kernels::PersistentTileScheduler;

// What both roles derive from a tile's position in the list: recomputed by each (a few integer
// operations and two length reads), so that nothing but the position and the rings' count is
// carried from one tile to the next.
struct FwdTileWork {
  kernels::QueryTile tile;
  int m0, sq_b, skv_b;
  kernels::KeyTiles kt;
  // The serving kernel's: the slots' first tokens in the packed Q and K/V (0 in the dense kernels).
  int q0 = 0, kv0 = 0;
};

template <class T>
__device__ __forceinline__ FwdTileWork fwd_tile_work(const FwdParams& p, uint32_t linear) {
  FwdTileWork w;
  w.tile = FwdScheduler::tile(p.tiles, linear);
  if constexpr (T::kScoreMod) {
    if (p.batches_inner) {
      const int h = w.tile.b;
      w.tile.b = w.tile.h;
      w.tile.h = h;
    }
  }
  if constexpr (T::kServing) {
    // Tokens fit int32 (the plan checks total + envelope), so do the TMA coordinates below.
    const kernels::BatchRows rows = kernels::batch_rows(p.serve, p.lens, w.tile.b, p.s_q, p.s_kv);
    w.sq_b = rows.sq;
    w.skv_b = rows.skv;
    w.q0 = static_cast<int>(rows.q0);
    w.kv0 = static_cast<int>(rows.kv0);
  } else {
    w.sq_b = p.lens.q_len(w.tile.b, p.s_q);
    w.skv_b = p.lens.kv_len(w.tile.b, p.s_kv);
  }
  w.m0 = w.tile.m_block * T::kBlockM;
  if (w.m0 < w.sq_b) {
    w.kt = kernels::key_tiles(p.score.mask, p.score.has_mask, w.m0,
                              min(w.m0 + T::kBlockM, w.sq_b) - 1, w.sq_b, w.skv_b, T::kBlockN);
  }
  return w;
}

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1) fwd_kernel(const __grid_constant__ FwdParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace cute;
  extern __shared__ __align__(1024) char smem[];
  auto& ss = *reinterpret_cast<typename T::SharedStorage*>(smem);
  const int tid = static_cast<int>(threadIdx.x);
  const int warpgroup = tid / 128;

  if (tid == 0) {
    CUTE_UNROLL
    for (int w = 0; w < T::kConsumerWarpgroups; ++w) {
      cutlass::arch::ClusterTransactionBarrier::init(&ss.q_full[w], 1);
      cutlass::arch::ClusterBarrier::init(&ss.q_empty[w], 128);
    }
    CUTE_UNROLL
    for (int s = 0; s < T::kStages; ++s) {
      cutlass::arch::ClusterTransactionBarrier::init(&ss.k_full[s], 1);
      cutlass::arch::ClusterTransactionBarrier::init(&ss.v_full[s], 1);
      cutlass::arch::ClusterBarrier::init(&ss.k_empty[s], T::kConsumerThreads);
      cutlass::arch::ClusterBarrier::init(&ss.v_empty[s], T::kConsumerThreads);
    }
    if constexpr (T::kScoreMod) {
      CUTE_UNROLL
      for (int s = 0; s < T::kBiasStages; ++s) {
        cutlass::arch::ClusterTransactionBarrier::init(&ss.bias_full[s], 1);
        cutlass::arch::ClusterBarrier::init(&ss.bias_empty[s], T::kConsumerThreads);
      }
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();  // the barriers are initialised

  // j: this CTA's tiles so far (the Q barriers' phase); it: key tiles through the rings so far.
  if (warpgroup == 0) {
    cutlass::arch::warpgroup_reg_dealloc<T::kProducerRegs>();
    if (tid == 0) {
      int it = 0;
      for (uint32_t j = 0;; ++j) {
        const uint32_t linear = FwdScheduler::position(p.tiles, blockIdx.x, gridDim.x, j);
        if (linear >= p.tiles.tiles) break;
        const FwdTileWork w = fwd_tile_work<T>(p, linear);
        if (w.kt.empty()) {
          // No load, but the Q barriers still turn: the consumers pass them, writing O = 0.
          CUTE_UNROLL
          for (int w = 0; w < T::kConsumerWarpgroups; ++w) {
            Barrier::wait(&ss.q_empty[w], (j & 1) ^ 1);
            TxBarrier::arrive(&ss.q_full[w]);
          }
          continue;
        }
        const TileOrder order(w.kt);
        const int h_kv = static_cast<int>(p.group_div.div(static_cast<uint32_t>(w.tile.h)));
        FwdMainloop<T>::load(p, ss, w.m0, w.tile.h, h_kv, w.tile.b, order, it, j & 1, w.sq_b, w.q0,
                             w.kv0, w.skv_b);
        it += order.n_tiles;
      }
    }
  } else {
    static_assert(setmaxnreg_fits(T::kThreads, T::kProducerRegs, T::kConsumerRegs),
                  "setmaxnreg asks for more registers than the CTA holds");
    cutlass::arch::warpgroup_reg_alloc<T::kConsumerRegs>();
    int it = 0;
    for (uint32_t j = 0;; ++j) {
      const uint32_t linear = FwdScheduler::position(p.tiles, blockIdx.x, gridDim.x, j);
      if (linear >= p.tiles.tiles) break;
      // Opaque per tile: the addresses and coordinates derived from the thread index (mask,
      // epilogue) are recomputed in each tile rather than hoisted out of the loop, where they
      // would stay live beside the accumulators and spill.
      const int ctid = kernels::opaque(tid - 128);
      const FwdTileWork w = fwd_tile_work<T>(p, linear);
      typename T::MmaPV mma_pv;
      Tensor acc_o = partition_fragment_C(mma_pv, cute::Shape<typename T::BM, typename T::Dv>{});
      clear(acc_o);
      constexpr int kRows = decltype(size<0>(gmma_row_col_layout(acc_o.layout())))::value;
      kernels::OnlineSoftmax<kRows> softmax;
      softmax.init();
      if constexpr (T::kScoreMod) {
        // Fixed-max rows: every row's max is fixed_max (fwd_mainloop.cuh, to_probs).
        if (p.fixed_max_rows) {
          CUTE_UNROLL
          for (int r = 0; r < kRows; ++r) softmax.row_max[r] = p.fixed_max;
        }
      }
      const int wg = ctid / 128;
      TxBarrier::wait(&ss.q_full[wg], j & 1);
      if (!w.kt.empty()) {
        // Where O has a buffer of its own, compute() frees this warpgroup's Q rows after its last
        // Q K^T, so that the next tile's rows load under the rest of this one.
        const TileOrder order(w.kt);
        FwdMainloop<T>::compute(p, ss, ctid, w.m0, w.skv_b, w.kt, order, it, acc_o, softmax);
        it += order.n_tiles;
      } else if constexpr (T::kOwnO) {
        Barrier::arrive(&ss.q_empty[wg]);
      }
      if constexpr (T::kServing) {
        // The slot read again, through an index the compiler cannot see through, rather than kept
        // in registers across the main loop (as sm80's serving kernel does).
        const kernels::BatchRows rows =
            kernels::batch_rows(p.serve, p.lens, kernels::opaque(w.tile.b), p.s_q, p.s_kv);
        fwd_epilogue<T>(p, ss, ctid, w.m0, w.tile.h, w.tile.b, rows.sq, acc_o, softmax, &rows);
      } else {
        fwd_epilogue<T>(p, ss, ctid, w.m0, w.tile.h, w.tile.b, w.sq_b, acc_o, softmax);
      }
      // O staged in Q's buffer (this warpgroup's rows of it): the epilogue's accesses (generic
      // proxy) come before the next Q's TMA write.
      if constexpr (!T::kOwnO) {
        cutlass::arch::fence_view_async_shared();
        Barrier::arrive(&ss.q_empty[wg]);
      }
    }
  }
#endif
}

}  // namespace floe::detail::sm90
