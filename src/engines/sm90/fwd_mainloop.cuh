// sm90 forward: the main loop of one CTA, in its two roles.
//
// load(): one thread of the producer warpgroup issues TMA for the Q tile (once), then for each
// key tile K and V into `kStages`-deep rings, each stage guarded by a full barrier (TMA's
// transaction bytes) and an empty barrier (every consumer thread arrives once it has read it).
//
// compute(): the two consumer warpgroups (64 query rows each) run, per key tile, S = Q K^T (SS
// GMMA), the boundary mask, the online softmax in base 2, and O += P V (RS GMMA, P converted in
// registers). Tiles the band or the key length cuts run a masked copy of the step; the others a
// copy with no mask code. Both roles walk the tiles in the same order (tile_at).
#pragma once

#include <cutlass/arch/barrier.h>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/tensor.hpp>

#include "engines/sm90/fwd_mask.cuh"
#include "engines/sm90/fwd_params.h"
#include "engines/sm90/gmma_fragment.cuh"
#include "kernels/band_tiles.cuh"

namespace floe::detail::sm90 {

// The key tiles of a CTA in visiting order: the masked ones first (the high end of the band,
// then its low end), then the fully visible ones, each group last tile first.
struct TileOrder {
  int n_tiles, n_high, n_masked, end, full_begin, full_end;

  __device__ __forceinline__ explicit TileOrder(const kernels::KeyTiles& kt)
      : n_tiles(kt.end - kt.begin),
        n_high(kt.end - kt.full_end),
        n_masked(kt.end - kt.full_end + kt.full_begin - kt.begin),
        end(kt.end),
        full_begin(kt.full_begin),
        full_end(kt.full_end) {}

  __device__ __forceinline__ int at(int t) const {
    if (t < n_high) return end - 1 - t;
    if (t < n_masked) return full_begin - 1 - (t - n_high);
    return full_end - 1 - (t - n_masked);
  }
};

using Barrier = cutlass::arch::ClusterBarrier;
using TxBarrier = cutlass::arch::ClusterTransactionBarrier;

template <class T>
struct FwdMainloop {
  using Element = typename T::Element;
  using Storage = typename T::SharedStorage;
  static constexpr int kStages = T::kStages;
  static constexpr uint64_t kCacheHint =
      static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_NORMAL);

  // One thread. h_kv: the kv head; the order of tiles is the consumers'.
  __device__ __forceinline__ static void load(const FwdParams& p, Storage& ss, int m0, int h,
                                              int h_kv, int b, const TileOrder& order) {
    TxBarrier::arrive_and_expect_tx(&ss.q_full, T::kQBytes);
    cute::SM90_TMA_LOAD_5D::copy(&p.tma_q, &ss.q_full, kCacheHint, ss.q.data(), 0, m0, 0, h, b);
    constexpr int kStageElems = T::kBlockN * T::kD;
    for (int t = 0; t < order.n_tiles; ++t) {
      const int stage = t % kStages;
      const uint32_t phase = (t / kStages) & 1;
      const int n0 = order.at(t) * T::kBlockN;
      // A fresh barrier is in phase 0: waiting for the parity of phase 1 returns at once, so the
      // first pass over the ring does not wait.
      Barrier::wait(&ss.k_empty[stage], phase ^ 1);
      TxBarrier::arrive_and_expect_tx(&ss.k_full[stage], T::kKVBytes);
      cute::SM90_TMA_LOAD_5D::copy(&p.tma_k, &ss.k_full[stage], kCacheHint,
                                   ss.k.data() + stage * kStageElems, 0, n0, 0, h_kv, b);
      Barrier::wait(&ss.v_empty[stage], phase ^ 1);
      TxBarrier::arrive_and_expect_tx(&ss.v_full[stage], T::kKVBytes);
      cute::SM90_TMA_LOAD_5D::copy(&p.tma_v, &ss.v_full[stage], kCacheHint,
                                   ss.v.data() + stage * kStageElems, 0, n0, 0, h_kv, b);
    }
  }

  // V rows past the batch's key length hold whatever the tensor holds there (TMA zero-fills only
  // past s_kv); P is 0 on them, but 0 x NaN is not. Zeroed in shared memory before P V reads
  // them, on the one tile that has them. Every consumer thread calls this.
  __device__ __forceinline__ static void zero_v_rows(Storage& ss, int stage, int first_row,
                                                     int ctid) {
    constexpr int kChunks = T::kD / 64;  // 128-byte rows per V row
    const int rows = T::kBlockN - first_row;
    uint4* base = reinterpret_cast<uint4*>(ss.v.data() + stage * T::kBlockN * T::kD);
    // Whole 128-byte lines: the swizzle permutes 16-byte pieces within a line, so the line of
    // (row, chunk) is where it was.
    for (int i = ctid; i < rows * kChunks * 8; i += T::kConsumerThreads) {
      const int piece = i % 8, line = i / 8;
      const int row = first_row + line % rows, chunk = line / rows;
      base[(chunk * T::kBlockN + row) * 8 + piece] = make_uint4(0, 0, 0, 0);
    }
    cutlass::arch::fence_view_async_shared();  // generic-proxy writes, read by GMMA (async proxy)
    cutlass::arch::NamedBarrier::sync(T::kConsumerThreads, 0);
  }

  template <class AccO, class Softmax>
  __device__ __forceinline__ static void compute(const FwdParams& p, Storage& ss, int ctid, int m0,
                                                 int skv_b, const kernels::KeyTiles& kt,
                                                 const TileOrder& order, AccO& acc_o,
                                                 Softmax& softmax) {
    using namespace cute;
    Tensor sQ = make_tensor(make_smem_ptr(ss.q.data()), typename T::SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(ss.k.data()), typename T::SmemLayoutKV{});
    Tensor sVt = make_tensor(make_smem_ptr(ss.v.data()), typename T::SmemLayoutVt{});

    typename T::MmaQK mma_qk;
    typename T::MmaPV mma_pv;
    auto thr_qk = mma_qk.get_thread_slice(ctid);
    auto thr_pv = mma_pv.get_thread_slice(ctid);
    Tensor tSrQ = thr_qk.partition_fragment_A(sQ);   // (MMA, MMA_M, MMA_K) descriptors
    Tensor tSrK = thr_qk.partition_fragment_B(sK);   // (MMA, MMA_N, MMA_K, stage)
    Tensor tOrV = thr_pv.partition_fragment_B(sVt);  // (MMA, MMA_N, MMA_K, stage)
    Tensor tScS = thr_qk.partition_C(
        make_identity_tensor(cute::Shape<typename T::BM, typename T::BN>{}));  // (row, col) of S

    const bool pad_kv = skv_b < p.s_kv && skv_b % T::kBlockN != 0;
    const float scale_log2 = p.scale_log2;

    TxBarrier::wait(&ss.q_full, 0);

    auto step = [&](int t, auto mask) __attribute__((always_inline)) {
      constexpr int kMask = decltype(mask)::value;
      const int stage = t % kStages;
      const uint32_t phase = (t / kStages) & 1;
      const int n0 = order.at(t) * T::kBlockN;

      Tensor acc_s = partition_fragment_C(mma_qk, cute::Shape<typename T::BM, typename T::BN>{});
      TxBarrier::wait(&ss.k_full[stage], phase);
      gmma<true>(mma_qk, tSrQ, tSrK(_, _, _, stage), acc_s);
      warpgroup_wait<0>();
      Barrier::arrive(&ss.k_empty[stage]);

      if constexpr (kMask != kNoMask) {
        mask_scores<kMask>(acc_s, tScS, m0, n0, kt.diag_lo, kt.diag_hi, skv_b);
      }
      softmax.update(acc_s, acc_o, scale_log2);
      Tensor rP = convert_fragment<Element>(acc_s);
      Tensor tOrP = make_tensor(rP.data(), gmma_acc_as_a_layout(rP.layout()));

      TxBarrier::wait(&ss.v_full[stage], phase);
      if constexpr (kMask != kNoMask) {
        if (pad_kv && n0 + T::kBlockN > skv_b) zero_v_rows(ss, stage, skv_b - n0, ctid);
      }
      warpgroup_fence_operand(tOrP);
      gmma<false>(mma_pv, tOrP, tOrV(_, _, _, stage), acc_o);
      warpgroup_wait<0>();
      warpgroup_fence_operand(tOrP);
      Barrier::arrive(&ss.v_empty[stage]);
    };

    // The masked tiles take the one-sided mask when none of them has a key left of the band:
    // decided once, a loop for each.
    int t = 0;
    if (kt.begin * T::kBlockN - (m0 + T::kBlockM - 1) >= kt.diag_lo) {
      CUTE_NO_UNROLL
      for (; t < order.n_masked; ++t) step(t, Int<kMaskRight>{});
    } else {
      CUTE_NO_UNROLL
      for (; t < order.n_masked; ++t) step(t, Int<kMaskBand>{});
    }
    CUTE_NO_UNROLL
    for (; t < order.n_tiles; ++t) step(t, Int<kNoMask>{});
  }
};

}  // namespace floe::detail::sm90
