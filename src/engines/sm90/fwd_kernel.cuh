// sm90 forward: the kernel. One CTA per (query tile, head, batch) (kernels/tile_scheduler.cuh),
// three warpgroups: warpgroup 0 produces (one thread issues every TMA; its registers drop to
// kProducerRegs), warpgroups 1 and 2 consume (kConsumerRegs each), 64 query rows each.
// Lengths are the batch's actual ones, read on the device (P6); a CTA whose rows are all past the
// batch's query length, or that sees no key, loads nothing and writes O = 0 and its stats.
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
#include "kernels/band_tiles.cuh"
#include "kernels/online_softmax.cuh"
#include "kernels/tile_scheduler.cuh"

namespace floe::detail::sm90 {

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1) fwd_kernel(const __grid_constant__ FwdParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace cute;
  extern __shared__ __align__(1024) char smem[];
  auto& ss = *reinterpret_cast<typename T::SharedStorage*>(smem);
  const int tid = static_cast<int>(threadIdx.x);
  const int warpgroup = tid / 128;

  if (tid == 0) {
    cutlass::arch::ClusterTransactionBarrier::init(&ss.q_full, 1);
    CUTE_UNROLL
    for (int s = 0; s < T::kStages; ++s) {
      cutlass::arch::ClusterTransactionBarrier::init(&ss.k_full[s], 1);
      cutlass::arch::ClusterTransactionBarrier::init(&ss.v_full[s], 1);
      cutlass::arch::ClusterBarrier::init(&ss.k_empty[s], T::kConsumerThreads);
      cutlass::arch::ClusterBarrier::init(&ss.v_empty[s], T::kConsumerThreads);
    }
    cutlass::arch::fence_barrier_init();
  }

  const kernels::QueryTile tile = kernels::QueryTileScheduler::tile(p.tiles, blockIdx.x);
  const int sq_b = p.lens.q_len(tile.b, p.s_q), skv_b = p.lens.kv_len(tile.b, p.s_kv);
  const int m0 = tile.m_block * T::kBlockM;
  kernels::KeyTiles kt;
  if (m0 < sq_b) {
    kt = kernels::key_tiles(p.score.mask, p.score.has_mask, m0, min(m0 + T::kBlockM, sq_b) - 1,
                            sq_b, skv_b, T::kBlockN);
  }
  const TileOrder order(kt);
  __syncthreads();  // the barriers are initialised

  if (warpgroup == 0) {
    cutlass::arch::warpgroup_reg_dealloc<T::kProducerRegs>();
    if (tid == 0 && !kt.empty()) {
      const int h_kv = static_cast<int>(p.group_div.div(static_cast<uint32_t>(tile.h)));
      FwdMainloop<T>::load(p, ss, m0, tile.h, h_kv, tile.b, order);
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<T::kConsumerRegs>();
    const int ctid = tid - 128;
    typename T::MmaPV mma_pv;
    Tensor acc_o = partition_fragment_C(mma_pv, cute::Shape<typename T::BM, typename T::D>{});
    clear(acc_o);
    constexpr int kRows = decltype(size<0>(gmma_row_col_layout(acc_o.layout())))::value;
    kernels::OnlineSoftmax<kRows> softmax;
    softmax.init();
    if (!kt.empty()) {
      FwdMainloop<T>::compute(p, ss, ctid, m0, skv_b, kt, order, acc_o, softmax);
    }
    fwd_epilogue<T>(p, ss, ctid, m0, tile.h, tile.b, sq_b, acc_o, softmax);
  }
#endif
}

}  // namespace floe::detail::sm90
