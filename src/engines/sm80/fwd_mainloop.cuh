// sm80 forward: the collective main loop of one CTA. Loads its Q tile once, then streams the
// key tiles it must visit through `kStages` K and `kStages` V buffers with cp.async, and for
// each tile computes S = Q K^T, applies the score mods (kernels/score_mod.cuh) and the mask
// (kernels/mask.cuh), the online softmax, and O += P V. Tiles the band or the key length cuts run a
// masked variant of the step (one-sided where the CTA's tiles allow it); the others run a variant
// with no mask code at all.
//
// Pipeline: the cp.async groups alternate K_0 (with Q), V_0, K_1, V_1, ...; V_{t+S-1} is issued
// once every warp has passed the barrier that ends tile t-1 (its V buffer is free), K_{t+S} once
// every warp has finished Q K_t^T. With one stage this is FlashAttention-2's alternation (V loads
// under Q K^T, K loads under softmax and P V); with two, each load has more than a whole tile
// of work to hide under. Every thread commits the same groups (empty ones past the last tile),
// so one wait count serves every step: 2 * (stages - 1) groups may stay in flight.
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm80/fwd_params.h"
#include "kernels/band_tiles.cuh"
#include "kernels/mask.cuh"
#include "kernels/math.cuh"
#include "kernels/score_mod.cuh"
#include "kernels/score_mod_kind.h"
#include "kernels/sm80/copy.cuh"
#include "kernels/sm80/fragment.cuh"
#include "kernels/sm80/serving_rows.h"
#include "kernels/tile_scheduler.cuh"

namespace floe::detail::sm80 {

// The softcap kind's scores: q.k -> h = -1 / (exp2(q.k * tanh_k) + 1) = (tanh - 1) / 2, the score
// in log2 units being s2 = cap_log2 + 2 cap_log2 h. The softmax takes h with 2 cap_log2 as its
// scale (folded into its exponent's FFMA as the plain kernel folds the scale), the constant
// cap_log2 cancels in P, and the epilogue gives it back to the LSE and takes it from the sink
// (fwd_epilogue.cuh). Four instructions a score (FMUL, MUFU.EX2, FADD, MUFU.RCP) where
// kernels::scale_scores_of issues six (the 1 - 2r and the * cap_log2 too). Same ends: q.k = +inf
// gives h = -0 (s2 = cap_log2), -inf gives -1 (s2 = -cap_log2); NaN stays NaN.
template <class Acc>
__device__ __forceinline__ void softcap_half_tanh(Acc& acc, const kernels::ScoreParams& sp) {
  using namespace cute;
  CUTE_UNROLL
  for (int i = 0; i < size(acc); ++i) {
    acc(i) = kernels::fast_rcp(-1.f - kernels::fast_exp2(acc(i) * sp.tanh_k));
  }
}

// kServing: rows start at the batch's slot (rows.q0, rows.kv0) and paged K/V rows come from the
// block table (kernels/sm80/serving_rows.h); the dense instantiation has q0 = kv0 = 0 and no pages.
template <class T, kernels::ScoreMod kMod, bool kServing>
struct FwdMainloop {
  using Element = typename T::Element;
  static constexpr int kBlockM = T::kBlockM;
  static constexpr int kBlockN = T::kBlockN;
  static constexpr int kStages = T::kStages;
  // The bias tile goes through shared memory (after V, one buffer per K stage) in the bias kinds
  // of the tiles that have room for it (T::kStageBias).
  static constexpr bool kStagedBias = kernels::has_bias_code(kMod) && T::kStageBias;
  static constexpr int kSmemBytes = T::kSmemBytes + (kStagedBias ? T::kSmemBiasBytes : 0);

  template <class AccO, class Softmax>
  __device__ __forceinline__ static void run(const FwdParams& p, char* smem, int tid,
                                             const kernels::QueryTile& tile, int sq_b, int skv_b,
                                             const kernels::KeyTiles& kt, AccO& acc_o,
                                             Softmax& softmax, float scale_log2,
                                             const kernels::BatchRows& rows) {
    using namespace cute;
    using BM = Int<kBlockM>;
    using BN = Int<kBlockN>;
    using DQK = Int<T::kDqk>;
    using DV = Int<T::kDv>;

    Tensor sQ =
        make_tensor(make_smem_ptr(reinterpret_cast<Element*>(smem)), typename T::SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(reinterpret_cast<Element*>(smem + T::kSmemQBytes)),
                            typename T::SmemLayoutK{});
    Tensor sV = make_tensor(
        make_smem_ptr(reinterpret_cast<Element*>(smem + T::kSmemQBytes + T::kSmemKBytes)),
        typename T::SmemLayoutV{});
    Tensor sVt = make_tensor(sV.data(), typename T::SmemLayoutVt{});

    // Global views: this (batch, head)'s rows, 64-bit offsets; K and V indexed by kv head.
    const int m0 = tile.m_block * kBlockM;
    const int h_kv = static_cast<int>(p.group_div.div(static_cast<uint32_t>(tile.h)));
    // A ragged side's batch stride is 0 and its rows start at the slot (q0, kv0); paged K and V
    // add each tile's (or row's) page below.
    const int64_t q0 = kServing ? rows.q0 : 0;
    const int64_t kv0 = kServing ? rows.kv0 : 0;
    const Element* q_bh = static_cast<const Element*>(p.q) + tile.b * p.q_strides.b +
                          tile.h * p.q_strides.h + q0 * p.q_strides.s;
    const Element* k_bh = static_cast<const Element*>(p.k) + tile.b * p.k_strides.b +
                          h_kv * p.k_strides.h + kv0 * p.k_strides.s;
    const Element* v_bh = static_cast<const Element*>(p.v) + tile.b * p.v_strides.b +
                          h_kv * p.v_strides.h + kv0 * p.v_strides.s;
    // Tiles are addressed as a 64-bit tile base plus 32-bit offsets within the tile (the planner
    // checks block rows x row stride < 2^31), which keeps the per-chunk addresses cheap.
    const int k_row = static_cast<int>(p.k_strides.s);
    const int v_row = static_cast<int>(p.v_strides.s);

    const Element* bias_bh = nullptr;
    if constexpr (kernels::has_bias_code(kMod)) {
      if (p.bias != nullptr) {
        bias_bh = static_cast<const Element*>(p.bias) + tile.b * p.bias_strides.b +
                  tile.h * p.bias_strides.h;
      }
    }
    // The bias tile of key tile n: staged with K_n, in K's stage (bias_tile.cuh).
    [[maybe_unused]] bool bias_smem = false;
    [[maybe_unused]] Element* const s_bias = reinterpret_cast<Element*>(smem + T::kSmemBytes);
    if constexpr (kStagedBias) bias_smem = p.bias_vec && bias_bh != nullptr;
    auto bias_stage = [&](int stage) __attribute__((always_inline)) {
      return s_bias + stage * (T::kSmemBiasBytes / kStages / 2);
    };

    // Global -> shared: cp.async, 16 bytes a thread, zero-filled past the actual rows and head
    // dims. The per-thread chunk offsets are recomputed for every tile from an opaque copy of the
    // thread index: a few integer instructions, where hoisting them out of the loop would pin a
    // dozen registers the accumulators need (and spill).
    typename T::GmemLoad gmem_load;
    // A paged tile: one base when a page holds the whole tile (the plan's tile_in_page), else
    // each row's page from the block table (rows past the key length look nothing up).
    auto load_paged = [&](const Element* head, int64_t page_stride, int row_stride, int n,
                          auto&& dst, int cols) __attribute__((always_inline)) {
      auto gthr = gmem_load.get_thread_slice(kernels::opaque(tid));
      const int j0 = n * kBlockN;
      if (p.serve.tile_in_page) {
        int row;
        const int64_t page = kernels::page_of(p.serve, tile.b, j0, &row);
        kernels::cp_async_rows(gthr, head + page * page_stride + int64_t{row} * row_stride,
                               row_stride, dst, skv_b - j0, cols);
      } else {
        kernels::cp_async_rows_by(
            gthr,
            [&](int r) {
              int row;
              const int64_t page = kernels::page_of(p.serve, tile.b, j0 + r, &row);
              return head + page * page_stride + static_cast<int64_t>(row) * row_stride;
            },
            head, dst, skv_b - j0, cols);
      }
    };
    auto load_k = [&](int n, int stage) __attribute__((always_inline)) {
      if (kServing && p.serve.paged_kv) {
        load_paged(k_bh, p.serve.k_page_stride, k_row, n, sK(_, _, stage), p.d_qk);
      } else {
        auto gthr = gmem_load.get_thread_slice(kernels::opaque(tid));
        const Element* base = k_bh + static_cast<int64_t>(n) * kBlockN * p.k_strides.s;
        kernels::cp_async_rows(gthr, base, k_row, sK(_, _, stage), skv_b - n * kBlockN, p.d_qk);
      }
      // The bias tile of key tile n rides with K_n (whatever K's addressing).
      if constexpr (kStagedBias) {
        if (bias_smem) {
          T::BiasTile::load(bias_stage(stage),
                            bias_bh + m0 * p.bias_strides.s + static_cast<int64_t>(n) * kBlockN,
                            static_cast<int>(p.bias_strides.s), p.s_q - m0, p.s_kv - n * kBlockN,
                            kernels::opaque(tid));
        }
      }
    };
    auto load_v = [&](int n, int stage) __attribute__((always_inline)) {
      if constexpr (kServing) {
        if (p.serve.paged_kv) {
          load_paged(v_bh, p.serve.v_page_stride, v_row, n, sV(_, _, stage), p.d_v);
          return;
        }
      }
      auto gthr = gmem_load.get_thread_slice(kernels::opaque(tid));
      const Element* base = v_bh + static_cast<int64_t>(n) * kBlockN * p.v_strides.s;
      kernels::cp_async_rows(gthr, base, v_row, sV(_, _, stage), skv_b - n * kBlockN, p.d_v);
    };

    // Shared -> registers (ldmatrix) and the tensor-core partitions.
    typename T::TiledMma mma;
    auto thr_mma = mma.get_thread_slice(tid);
    Element* const shape_only = reinterpret_cast<Element*>(smem);  // fragments take only the shape
    Tensor tSrQ = thr_mma.partition_fragment_A(
        make_tensor(make_smem_ptr(shape_only), make_layout(cute::Shape<BM, DQK>{})));
    Tensor tSrK = thr_mma.partition_fragment_B(
        make_tensor(make_smem_ptr(shape_only), make_layout(cute::Shape<BN, DQK>{})));
    Tensor tOrVt = thr_mma.partition_fragment_B(
        make_tensor(make_smem_ptr(shape_only), make_layout(cute::Shape<DV, BN>{})));

    auto q_copy = make_tiled_copy_A(typename T::SmemLoadAtom{}, mma);
    auto q_thr = q_copy.get_thread_slice(tid);
    Tensor tSsQ = q_thr.partition_S(sQ);
    Tensor tSrQ_view = q_thr.retile_D(tSrQ);
    auto k_copy = make_tiled_copy_B(typename T::SmemLoadAtom{}, mma);
    auto k_thr = k_copy.get_thread_slice(tid);
    Tensor tSsK = k_thr.partition_S(sK);  // (CPY, MMA_N, MMA_K, stage)
    Tensor tSrK_view = k_thr.retile_D(tSrK);
    auto v_copy = make_tiled_copy_B(typename T::SmemLoadAtomT{}, mma);
    auto v_thr = v_copy.get_thread_slice(tid);
    Tensor tOsVt = v_thr.partition_S(sVt);  // (CPY, MMA_N, MMA_K, stage)
    Tensor tOrVt_view = v_thr.retile_D(tOrVt);

    // (row, col) within the tile of each score this thread holds.
    Tensor tScS = thr_mma.partition_C(make_identity_tensor(cute::Shape<BM, BN>{}));

    // Visiting order: the masked tiles first (the high end of the band, e.g. the causal diagonal,
    // then its low end), then the fully visible ones, each group last tile first. Two loops, one
    // with the mask and one without, so unmasked tiles run no mask code at all.
    const int n_tiles = kt.end - kt.begin;
    const int n_high = kt.end - kt.full_end;     // masked tiles above the full range
    const int n_low = kt.full_begin - kt.begin;  // masked tiles below it
    const int n_masked = n_high + n_low;
    auto tile_at = [&](int t) __attribute__((always_inline)) {
      if (t < n_high) return kt.end - 1 - t;
      if (t < n_masked) return kt.full_begin - 1 - (t - n_high);
      return kt.full_end - 1 - (t - n_masked);
    };

    // Prologue: {Q, K_0}, V_0, K_1, ..., V_{S-2}, K_{S-1}.
    {
      auto gthr = gmem_load.get_thread_slice(tid);
      const Element* base = q_bh + m0 * p.q_strides.s;
      kernels::cp_async_rows(gthr, base, static_cast<int>(p.q_strides.s), sQ, sq_b - m0, p.d_qk);
    }
    load_k(tile_at(0), 0);
    cp_async_fence();
    CUTE_UNROLL
    for (int s = 1; s < kStages; ++s) {
      if (s - 1 < n_tiles) load_v(tile_at(s - 1), s - 1);
      cp_async_fence();
      if (s < n_tiles) load_k(tile_at(s), s);
      cp_async_fence();
    }

    // Forced inline: the accumulators must stay in registers (a called step would pass them
    // through the stack).
    // mask: kNoMask, kMaskRight or kMaskBand (kernels/mask.cuh), a compile-time constant.
    auto step = [&](int t, auto mask) __attribute__((always_inline)) {
      constexpr int kMask = decltype(mask)::value;
      const int stage = kStages == 1 ? 0 : t % kStages;
      const int n = tile_at(t);

      Tensor acc_s = partition_fragment_C(mma, cute::Shape<BM, BN>{});  // (4, MMA_M, MMA_N)
      clear(acc_s);

      cp_async_wait<2 * (kStages - 1)>();  // K_t has landed (this thread's copies) ...
      __syncthreads();                     // ... everyone's; and every warp is done with tile t-1
      if (t + kStages - 1 < n_tiles) load_v(tile_at(t + kStages - 1), (t + kStages - 1) % kStages);
      cp_async_fence();

      kernels::gemm_smem_smem(mma, acc_s, tSrQ, tSrK, tSsQ, tSsK(_, _, _, stage), tSrQ_view,
                              tSrK_view, q_copy, k_copy);

      // The score mods: log2 units (scale or softcap), then the bias. Before V's wait: the
      // staged bias shares K_t's stage, which the barrier below hands to K_{t+S}.
      // The softcap kind's after it (nothing staged): before it, its results were spilled across
      // the barrier (17 values a tile, ptxas sm_90a).
      if constexpr (kMod != kernels::ScoreMod::plain && kMod != kernels::ScoreMod::softcap) {
        kernels::scale_scores_of<kMod>(acc_s, p.score);
        if constexpr (kernels::has_bias_code(kMod)) {
          if (bias_smem) {
            T::BiasTile::add(kernels::acc_row_col(acc_s), kernels::acc_row_col(tScS),
                             bias_stage(stage));
          } else if (bias_bh != nullptr) {
            kernels::add_bias(kernels::acc_row_col(acc_s), kernels::acc_row_col(tScS), bias_bh,
                              p.bias_strides.s, m0, n * kBlockN, p.s_q, p.s_kv);
          }
        }
      }

      cp_async_wait<2 * (kStages - 1)>();  // V_t has landed ...
      __syncthreads();                     // ... everyone's; and every warp is done reading K_t
      if (t + kStages < n_tiles) load_k(tile_at(t + kStages), stage);
      cp_async_fence();

      if constexpr (kMod == kernels::ScoreMod::softcap) {
        softcap_half_tanh(acc_s, p.score);  // the kernel's scale_log2 is 2 cap_log2
      }
      if constexpr (kMask != kernels::kNoMask) {
        kernels::mask_scores<kMask>(kernels::acc_row_col(acc_s), kernels::acc_row_col(tScS), m0,
                                    n * kBlockN, kt.diag_lo, kt.diag_hi, skv_b);
      }
      softmax.update(kernels::acc_row_col(acc_s), kernels::acc_row_col(acc_o), scale_log2);

      Tensor rP = kernels::convert_fragment<Element>(acc_s);
      Tensor tOrP = make_tensor(rP.data(), kernels::acc_as_a_operand_layout(rP.layout()));
      kernels::gemm_reg_smem(mma, acc_o, tOrP, tOrVt, tOsVt(_, _, _, stage), tOrVt_view, v_copy);
    };

    // The masked tiles take the one-sided mask when none of them has a key left of the band
    // (causal, and any band open on the left): decided once, a loop for each, so that the
    // element tests of the other variant are not issued.
    int t = 0;
    if (kt.begin * kBlockN - (m0 + kBlockM - 1) >= kt.diag_lo) {
      CUTE_NO_UNROLL
      for (; t < n_masked; ++t) step(t, cute::Int<kernels::kMaskRight>{});
    } else {
      CUTE_NO_UNROLL
      for (; t < n_masked; ++t) step(t, cute::Int<kernels::kMaskBand>{});
    }
    CUTE_NO_UNROLL
    for (; t < n_tiles; ++t) step(t, cute::Int<kernels::kNoMask>{});
  }
};

}  // namespace floe::detail::sm80
