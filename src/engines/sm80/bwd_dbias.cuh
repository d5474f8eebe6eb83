// sm80 backward, the bias gradient of a broadcast bias: dBias[bb, bh] = sum of dS over the
// (batch, head) pairs the bias broadcasts to. One CTA per (query tile, key tile, bias batch,
// bias head) recomputes S and dP for each of those pairs, in a fixed order, and sums dS in
// registers: no atomics, no workspace, the same bits on every run. The price is two of the
// backward's five GEMMs again; a bias with a gradient per (batch, head) needs none of this (the
// main kernel writes it). The pairs are pipelined: the next pair's tiles load under the current
// pair's products and scores.
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm80/bwd_params.h"
#include "engines/sm80/bwd_scores.cuh"
#include "kernels/band_tiles.cuh"
#include "kernels/constants.h"
#include "kernels/math.cuh"
#include "kernels/score_mod_kind.h"
#include "kernels/sm80/copy.cuh"
#include "kernels/sm80/fragment.cuh"

namespace floe::detail::sm80 {

// kServing: ragged sides' rows start at each batch's slot (kernels/serving_rows.h).
template <class T, kernels::ScoreMod kMod, bool kServing>
__global__ void __launch_bounds__(T::kThreads, 1)
    bwd_dbias_kernel(const __grid_constant__ BwdParams p) {
  static_assert(kernels::has_bias_code(kMod), "a bias gradient implies a bias kind");
  using namespace cute;
  using Element = typename T::Element;
  using BM = Int<T::kBlockM>;
  using BN = Int<T::kBlockN>;
  using DQK = Int<T::kDqk>;
  using DV = Int<T::kDv>;
  extern __shared__ __align__(128) char smem[];
  const int tid = static_cast<int>(threadIdx.x);

  const kernels::BiasTile tile = kernels::BiasTileScheduler::tile(p.bias_tiles, blockIdx.x);
  const int m_block = tile.m_block, n_block = tile.n_block;
  const int bias_h = tile.h, bias_b = tile.b;
  const int m0 = m_block * T::kBlockM;
  const int n0 = n_block * T::kBlockN;

  // Q, dO (one buffer each, at the main kernel's offsets), K, V.
  auto at = [&](int offset) { return make_smem_ptr(reinterpret_cast<Element*>(smem + offset)); };
  Tensor sQ = make_tensor(at(0), typename T::SmemLayoutQ{});
  Tensor sdO = make_tensor(at(T::kOffdO), typename T::SmemLayoutdO{});
  Tensor sK = make_tensor(at(T::kOffK), typename T::SmemLayoutK{});
  Tensor sV = make_tensor(at(T::kOffV), typename T::SmemLayoutV{});

  typename T::TiledMmaSdP mma;
  auto thr = mma.get_thread_slice(tid);
  Element* const shape_only = reinterpret_cast<Element*>(smem);
  auto frag_shape = [&](auto rows, auto cols) {
    return make_tensor(make_smem_ptr(shape_only), make_layout(make_shape(rows, cols)));
  };
  Tensor tSrQ = thr.partition_fragment_A(frag_shape(BM{}, DQK{}));
  Tensor tSrK = thr.partition_fragment_B(frag_shape(BN{}, DQK{}));
  Tensor tdPrdO = thr.partition_fragment_A(frag_shape(BM{}, DV{}));
  Tensor tdPrV = thr.partition_fragment_B(frag_shape(BN{}, DV{}));
  auto copy_a = make_tiled_copy_A(typename T::SmemLoadAtom{}, mma);
  auto thr_a = copy_a.get_thread_slice(tid);
  Tensor tSsQ = thr_a.partition_S(sQ);
  Tensor tSrQ_v = thr_a.retile_D(tSrQ);
  Tensor tdPsdO = thr_a.partition_S(sdO);
  Tensor tdPrdO_v = thr_a.retile_D(tdPrdO);
  auto copy_b = make_tiled_copy_B(typename T::SmemLoadAtom{}, mma);
  auto thr_b = copy_b.get_thread_slice(tid);
  Tensor tSsK = thr_b.partition_S(sK);
  Tensor tSrK_v = thr_b.retile_D(tSrK);
  Tensor tdPsV = thr_b.partition_S(sV);
  Tensor tdPrV_v = thr_b.retile_D(tdPrV);
  Tensor tScS = thr.partition_C(make_identity_tensor(cute::Shape<BM, BN>{}));
  constexpr int kRows = decltype(size<0>(kernels::acc_row_col_layout(tScS.layout())))::value;

  Tensor acc_db = partition_fragment_C(mma, cute::Shape<BM, BN>{});
  clear(acc_db);

  // The bias tile is the same for every (batch, head) pair summed here (they differ only in the
  // broadcast dims): read once, in the S fragment's layout, before the first pair's tiles load,
  // and added from registers for each pair, where a thread holds at most 32 scores (d64's 64
  // spilled 248 bytes; those tiles read it from global memory for each pair). Elements past s_q or
  // s_kv hold 0 (those scores are masked or never written).
  constexpr bool kBiasInRegisters = decltype(size(acc_db))::value <= 32;
  Tensor rbias = make_tensor<Element>(acc_db.layout());
  if constexpr (kBiasInRegisters) {
    const Element* bias_bh =
        static_cast<const Element*>(p.bias) + bias_b * p.bias_strides.b + bias_h * p.bias_strides.h;
    auto rb = kernels::acc_row_col(rbias);
    auto c = kernels::acc_row_col(tScS);
    CUTE_UNROLL
    for (int r = 0; r < size<0>(rb); ++r) {
      const int row = m0 + get<0>(c(r, 0));
      CUTE_UNROLL
      for (int j = 0; j < size<1>(rb); ++j) {
        const int col = n0 + get<1>(c(r, j));
        rb(r, j) = row < p.s_q && col < p.s_kv ? bias_bh[row * p.bias_strides.s + col] : Element(0);
      }
    }
  }
  auto bias_from_registers = [&](auto& acc) __attribute__((always_inline)) {
    if constexpr (kBiasInRegisters) {
      CUTE_UNROLL
      for (int i = 0; i < size(acc); ++i) acc(i) += static_cast<float>(rbias(i)) * kernels::kLog2e;
    }
    return kBiasInRegisters;
  };
  typename T::GmemLoad gmem_load;
  auto gthr = gmem_load.get_thread_slice(tid);
  const int b_first = p.bias_b == 1 ? 0 : bias_b;
  const int b_end = p.bias_b == 1 ? p.b : bias_b + 1;
  const int h_first = p.bias_h == 1 ? 0 : bias_h;
  const int h_end = p.bias_h == 1 ? p.h_q : bias_h + 1;

  // The pairs in a fixed order (batch, then head), skipping the batches whose keys of this tile
  // no row of the query tile sees. Pipelined: the next pair's Q and dO load into the other buffer
  // under the whole current pair (one buffer: with K and V), its K and V once the current S and
  // dP products are done; the scores and the sum run under those loads.
  auto batch_rows = [&](int b) __attribute__((always_inline)) {
    return kServing
               ? kernels::batch_rows(p.serve, p.lens, b, p.s_q, p.s_kv)
               : kernels::BatchRows{
                     0,     0,     p.lens.q_len(b, p.s_q), p.lens.kv_len(b, p.s_kv), p.s_q, p.s_kv,
                     p.s_q, p.s_kv};
  };
  auto visible = [&](int b) __attribute__((always_inline)) {
    const kernels::BatchRows rows = batch_rows(b);
    const int sq_b = rows.sq;
    const int skv_b = rows.skv;
    if (n0 >= skv_b) return false;
    const kernels::QueryTiles qt =
        kernels::query_tiles(p.score.mask, p.score.has_mask, n0, min(n0 + T::kBlockN, skv_b) - 1,
                             sq_b, skv_b, T::kBlockM);
    return m_block >= qt.begin && m_block < qt.end;
  };
  auto next_batch = [&](int b) __attribute__((always_inline)) {
    while (b < b_end && !visible(b)) ++b;
    return b;
  };
  auto load_q_do = [&](int b, int h, int buf) __attribute__((always_inline)) {
    const kernels::BatchRows rows = batch_rows(b);
    const int sq_b = rows.sq;
    const int64_t q0 = kServing ? rows.q0 : 0;
    kernels::cp_async_rows(gthr,
                           static_cast<const Element*>(p.q) + b * p.q_strides.b +
                               h * p.q_strides.h + (q0 + m0) * p.q_strides.s,
                           static_cast<int>(p.q_strides.s), sQ(_, _, buf), sq_b - m0, p.d_qk);
    kernels::cp_async_rows(gthr,
                           static_cast<const Element*>(p.d_o) + b * p.do_strides.b +
                               h * p.do_strides.h + (q0 + m0) * p.do_strides.s,
                           static_cast<int>(p.do_strides.s), sdO(_, _, buf), sq_b - m0, p.d_v);
  };
  auto load_k_v = [&](int b, int h) __attribute__((always_inline)) {
    const kernels::BatchRows rows = batch_rows(b);
    const int skv_b = rows.skv;
    const int64_t kv0 = kServing ? rows.kv0 : 0;
    const int h_kv = h / p.group;
    kernels::cp_async_rows(gthr,
                           static_cast<const Element*>(p.k) + b * p.k_strides.b +
                               h_kv * p.k_strides.h + (kv0 + n0) * p.k_strides.s,
                           static_cast<int>(p.k_strides.s), sK, skv_b - n0, p.d_qk);
    kernels::cp_async_rows(gthr,
                           static_cast<const Element*>(p.v) + b * p.v_strides.b +
                               h_kv * p.v_strides.h + (kv0 + n0) * p.v_strides.s,
                           static_cast<int>(p.v_strides.s), sV, skv_b - n0, p.d_v);
  };

  int b = next_batch(b_first), h = h_first, buf = 0;
  if (b < b_end) {
    load_q_do(b, h, 0);
    load_k_v(b, h);
    cp_async_fence();
  }
  while (b < b_end) {
    int nb = b, nh = h + 1;
    if (nh == h_end) {
      nh = h_first;
      nb = next_batch(b + 1);
    }
    const bool more = nb < b_end;
    const int nbuf = T::kQStages == 2 ? buf ^ 1 : 0;

    cp_async_wait<0>();  // this pair's tiles have landed ...
    __syncthreads();     // ... everyone's; and every warp is done with the previous pair
    if constexpr (T::kQStages == 2) {
      if (more) load_q_do(nb, nh, nbuf);
      cp_async_fence();
    }

    const kernels::BatchRows rows = batch_rows(b);
    const int sq_b = rows.sq;
    const int skv_b = rows.skv;
    const kernels::QueryTiles qt =
        kernels::query_tiles(p.score.mask, p.score.has_mask, n0, min(n0 + T::kBlockN, skv_b) - 1,
                             sq_b, skv_b, T::kBlockM);
    const int64_t row_base = (static_cast<int64_t>(b) * p.h_q + h) * p.s_q_pad + m0;
    float lse2[kRows], delta[kRows];
    load_row_stats(p, row_base, tScS, lse2, delta);

    Tensor acc_s = partition_fragment_C(mma, cute::Shape<BM, BN>{});
    clear(acc_s);
    kernels::gemm_smem_smem(mma, acc_s, tSrQ, tSrK, tSsQ(_, _, _, buf), tSsK, tSrQ_v, tSrK_v,
                            copy_a, copy_b);
    Tensor acc_dp = partition_fragment_C(mma, cute::Shape<BM, BN>{});
    clear(acc_dp);
    kernels::gemm_smem_smem(mma, acc_dp, tdPrdO, tdPrV, tdPsdO(_, _, _, buf), tdPsV, tdPrdO_v,
                            tdPrV_v, copy_a, copy_b);
    __syncthreads();  // every warp is done reading K and V (and, with one buffer, Q and dO)
    if (more) {
      if constexpr (T::kQStages == 1) load_q_do(nb, nh, 0);
      load_k_v(nb, nh);
    }
    cp_async_fence();

    Tensor dtanh = make_tensor<float>(acc_s.layout());  // unused: dBias is taken before it
    backward_scores<T, kMod>(acc_s, dtanh, tScS, p, b, h, m0, n0, qt, sq_b, skv_b,
                             bias_from_registers);
    auto s = kernels::acc_row_col(acc_s);
    auto dp = kernels::acc_row_col(acc_dp);
    auto db = kernels::acc_row_col(acc_db);
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) {
        db(r, c) += kernels::fast_exp2(s(r, c) - lse2[r]) * (dp(r, c) - delta[r]);
      }
    }
    b = nb;
    h = nh;
    buf = nbuf;
  }

  Element* out =
      static_cast<Element*>(p.dbias_sum) + bias_b * p.dbias_strides.b + bias_h * p.dbias_strides.h;
  auto db = kernels::acc_row_col(acc_db);
  auto c = kernels::acc_row_col(tScS);
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const int row = m0 + get<0>(c(r, 0));
    if (row >= p.s_q) continue;
    CUTE_UNROLL
    for (int j = 0; j < size<1>(db); ++j) {
      const int col = n0 + get<1>(c(r, j));
      if (col < p.s_kv) out[row * p.dbias_strides.s + col] = static_cast<Element>(db(r, j));
    }
  }
}

}  // namespace floe::detail::sm80
