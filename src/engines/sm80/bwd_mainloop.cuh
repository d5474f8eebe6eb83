// sm80 backward: the collective main loop of one CTA (see bwd_kernel.cuh). K and V are loaded
// once; the (query head, query tile) visits stream Q and dO through two buffers with cp.async,
// the next visit's tiles loading under the whole current one. One barrier opens each visit (its
// Q and dO have landed, and every warp is done with the previous visit's buffers, P and dS), one
// separates writing P and dS from the GEMMs that read them transposed. The tiles of parts with
// less shared memory keep one Q/dO buffer (T::kQStages == 1): the next visit's tiles load after
// a barrier at the end of the current one, and the visit waits for them.
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm80/bwd_dbias_sum.cuh"
#include "engines/sm80/bwd_dq_accum.cuh"
#include "engines/sm80/bwd_params.h"
#include "engines/sm80/bwd_scores.cuh"
#include "engines/sm80/bwd_semaphore.cuh"
#include "kernels/band_tiles.cuh"
#include "kernels/constants.h"
#include "kernels/math.cuh"
#include "kernels/score_mod_kind.h"
#include "kernels/sm80/bias_tile.cuh"
#include "kernels/sm80/copy.cuh"
#include "kernels/sm80/fragment.cuh"

namespace floe::detail::sm80 {

// kServing: Q, dO, K and V rows start at the batch's slot (blk.q0, blk.kv0).
template <class T, kernels::ScoreMod kMod, bool kServing>
struct BwdMainloop {
  using Element = typename T::Element;
  static constexpr int kBlockM = T::kBlockM;
  static constexpr int kBlockN = T::kBlockN;
  // The bias tile staged in dS's buffer (bias kinds), dBias written from dS's tile (bias kind:
  // no softcap factor between them), where the tile's shape allows (T::kStageBias).
  static constexpr bool kStagedBias = kernels::has_bias_code(kMod) && T::kStageBias;
  static constexpr bool kStagedDbias = kMod == kernels::ScoreMod::bias && T::kStageBias;

  template <class AccDK, class AccDV>
  __device__ __forceinline__ static void run(const BwdParams& p, char* smem, int tid,
                                             const BwdBlock& blk, const kernels::QueryTiles& qt,
                                             AccDK& acc_dk, AccDV& acc_dv) {
    using namespace cute;
    using BM = Int<kBlockM>;
    using BN = Int<kBlockN>;
    using DQK = Int<T::kDqk>;
    using DV = Int<T::kDv>;

    auto at = [&](int offset) { return make_smem_ptr(reinterpret_cast<Element*>(smem + offset)); };
    Tensor sQ = make_tensor(at(0), typename T::SmemLayoutQ{});  // (BM, DQK, 2)
    Tensor sQt = make_tensor(at(0), typename T::SmemLayoutQt{});
    Tensor sdO = make_tensor(at(T::kOffdO), typename T::SmemLayoutdO{});  // (BM, DV, 2)
    Tensor sdOt = make_tensor(at(T::kOffdO), typename T::SmemLayoutdOt{});
    Tensor sK = make_tensor(at(T::kOffK), typename T::SmemLayoutK{});  // (BN, DQK)
    Tensor sKt = make_tensor(at(T::kOffK), typename T::SmemLayoutKt{});
    Tensor sV = make_tensor(at(T::kOffV), typename T::SmemLayoutV{});  // (BN, DV)
    Tensor sP = make_tensor(at(T::kOffP), typename T::SmemLayoutP{});  // (BM, BN)
    Tensor sPt = make_tensor(at(T::kOffP), typename T::SmemLayoutPt{});
    Tensor sdS = make_tensor(at(T::kOffdS), typename T::SmemLayoutP{});
    Tensor sdSt = make_tensor(at(T::kOffdS), typename T::SmemLayoutPt{});

    // --- Global -> shared (cp.async, zero-filled past the actual rows and head dims).
    const int b = blk.b, n0 = blk.n0;
    const int64_t q0 = kServing ? blk.q0 : 0;
    const int64_t kv0 = kServing ? blk.kv0 : 0;
    const int h_first = blk.h_kv * p.group;
    const int n_m = qt.end - qt.begin;
    const int visits = p.group * n_m;
    typename T::GmemLoad gmem_load;
    {
      auto gthr = gmem_load.get_thread_slice(tid);
      const Element* k_tile = static_cast<const Element*>(p.k) + b * p.k_strides.b +
                              blk.h_kv * p.k_strides.h + (kv0 + n0) * p.k_strides.s;
      const Element* v_tile = static_cast<const Element*>(p.v) + b * p.v_strides.b +
                              blk.h_kv * p.v_strides.h + (kv0 + n0) * p.v_strides.s;
      kernels::cp_async_rows(gthr, k_tile, static_cast<int>(p.k_strides.s), sK, blk.skv_b - n0,
                             p.d_qk);
      kernels::cp_async_rows(gthr, v_tile, static_cast<int>(p.v_strides.s), sV, blk.skv_b - n0,
                             p.d_v);
    }
    auto load_q_do = [&](int h, int m_idx, int buf) __attribute__((always_inline)) {
      auto gthr = gmem_load.get_thread_slice(kernels::opaque(tid));
      const int m0 = m_idx * kBlockM;
      const Element* q_tile = static_cast<const Element*>(p.q) + b * p.q_strides.b +
                              h * p.q_strides.h + (q0 + m0) * p.q_strides.s;
      const Element* do_tile = static_cast<const Element*>(p.d_o) + b * p.do_strides.b +
                               h * p.do_strides.h + (q0 + m0) * p.do_strides.s;
      kernels::cp_async_rows(gthr, q_tile, static_cast<int>(p.q_strides.s), sQ(_, _, buf),
                             blk.sq_b - m0, p.d_qk);
      kernels::cp_async_rows(gthr, do_tile, static_cast<int>(p.do_strides.s), sdO(_, _, buf),
                             blk.sq_b - m0, p.d_v);
    };
    load_q_do(h_first, qt.begin, 0);
    cp_async_fence();

    // --- Shared -> registers and the tensor-core partitions of the three GEMM shapes.
    Element* const shape_only = reinterpret_cast<Element*>(smem);  // fragments take only the shape
    auto frag_shape = [&](auto rows, auto cols) {
      return make_tensor(make_smem_ptr(shape_only), make_layout(make_shape(rows, cols)));
    };
    typename T::TiledMmaSdP mma_sdp;
    auto thr_sdp = mma_sdp.get_thread_slice(tid);
    Tensor tSrQ = thr_sdp.partition_fragment_A(frag_shape(BM{}, DQK{}));
    Tensor tSrK = thr_sdp.partition_fragment_B(frag_shape(BN{}, DQK{}));
    Tensor tdPrdO = thr_sdp.partition_fragment_A(frag_shape(BM{}, DV{}));
    Tensor tdPrV = thr_sdp.partition_fragment_B(frag_shape(BN{}, DV{}));
    auto sdp_copy_a = make_tiled_copy_A(typename T::SmemLoadAtom{}, mma_sdp);
    auto sdp_thr_a = sdp_copy_a.get_thread_slice(tid);
    Tensor tSsQ = sdp_thr_a.partition_S(sQ);  // (CPY, MMA_M, MMA_K, 2)
    Tensor tSrQ_v = sdp_thr_a.retile_D(tSrQ);
    Tensor tdPsdO = sdp_thr_a.partition_S(sdO);
    Tensor tdPrdO_v = sdp_thr_a.retile_D(tdPrdO);
    auto sdp_copy_b = make_tiled_copy_B(typename T::SmemLoadAtom{}, mma_sdp);
    auto sdp_thr_b = sdp_copy_b.get_thread_slice(tid);
    Tensor tSsK = sdp_thr_b.partition_S(sK);
    Tensor tSrK_v = sdp_thr_b.retile_D(tSrK);
    Tensor tdPsV = sdp_thr_b.partition_S(sV);
    Tensor tdPrV_v = sdp_thr_b.retile_D(tdPrV);

    typename T::TiledMmadKV mma_dkv;
    auto thr_dkv = mma_dkv.get_thread_slice(tid);
    Tensor tdKVrA = thr_dkv.partition_fragment_A(frag_shape(BN{}, BM{}));  // P^T, then dS^T
    Tensor tdVrdOt = thr_dkv.partition_fragment_B(frag_shape(DV{}, BM{}));
    Tensor tdKrQt = thr_dkv.partition_fragment_B(frag_shape(DQK{}, BM{}));
    auto dkv_copy_a = make_tiled_copy_A(typename T::SmemLoadAtomT{}, mma_dkv);
    auto dkv_thr_a = dkv_copy_a.get_thread_slice(tid);
    Tensor tdVsPt = dkv_thr_a.partition_S(sPt);
    Tensor tdKsdSt = dkv_thr_a.partition_S(sdSt);
    Tensor tdKVrA_v = dkv_thr_a.retile_D(tdKVrA);
    auto dkv_copy_b = make_tiled_copy_B(typename T::SmemLoadAtomT{}, mma_dkv);
    auto dkv_thr_b = dkv_copy_b.get_thread_slice(tid);
    Tensor tdVsdOt = dkv_thr_b.partition_S(sdOt);  // (CPY, MMA_N, MMA_K, 2)
    Tensor tdVrdOt_v = dkv_thr_b.retile_D(tdVrdOt);
    Tensor tdKsQt = dkv_thr_b.partition_S(sQt);
    Tensor tdKrQt_v = dkv_thr_b.retile_D(tdKrQt);

    typename T::TiledMmadQ mma_dq;
    auto thr_dq = mma_dq.get_thread_slice(tid);
    Tensor tdQrdS = thr_dq.partition_fragment_A(frag_shape(BM{}, BN{}));
    Tensor tdQrKt = thr_dq.partition_fragment_B(frag_shape(DQK{}, BN{}));
    auto dq_copy_a = make_tiled_copy_A(typename T::SmemLoadAtom{}, mma_dq);
    auto dq_thr_a = dq_copy_a.get_thread_slice(tid);
    Tensor tdQsdS = dq_thr_a.partition_S(sdS);
    Tensor tdQrdS_v = dq_thr_a.retile_D(tdQrdS);
    auto dq_copy_b = make_tiled_copy_B(typename T::SmemLoadAtomT{}, mma_dq);
    auto dq_thr_b = dq_copy_b.get_thread_slice(tid);
    Tensor tdQsKt = dq_thr_b.partition_S(sKt);
    Tensor tdQrKt_v = dq_thr_b.retile_D(tdQrKt);

    auto ps_copy = make_tiled_copy_C(typename T::SmemStoreAtom{}, mma_sdp);
    auto ps_thr = ps_copy.get_thread_slice(tid);
    Tensor tPsP = ps_thr.partition_D(sP);
    Tensor tPsdS = ps_thr.partition_D(sdS);

    // (row, col) within the tile of each S / dP element.
    Tensor tScS = thr_sdp.partition_C(make_identity_tensor(cute::Shape<BM, BN>{}));
    constexpr int kRows = decltype(size<0>(kernels::acc_row_col_layout(tScS.layout())))::value;

    // The dK and dV products' shared-memory partitions and the mask's coordinates, as a visit
    // uses them: the bias kind recomputes them in each visit from an opaque thread index (a few
    // integer instructions) rather than holding them across the loop, where they spilled (12 B,
    // ptxas sm_90a; now none, 254 registers); the other kinds take the ones above, hoisted (the
    // same SASS as before; softcap + bias spilled more with the recomputation). Recomputing the
    // S, dP and dQ products' partitions too removed no more spill and cost 28 more instructions.
    constexpr bool kPerVisit = kMod == kernels::ScoreMod::bias;
    auto visit_part = [&](auto const& hoisted, auto const& copy, auto const& smem_tensor)
        __attribute__((always_inline)) {
      if constexpr (kPerVisit) {
        return copy.get_thread_slice(kernels::opaque(tid)).partition_S(smem_tensor);
      } else {
        return hoisted;
      }
    };
    auto visit_coords = [&]() __attribute__((always_inline)) {
      if constexpr (kPerVisit) {
        return mma_sdp.get_thread_slice(kernels::opaque(tid))
            .partition_C(make_identity_tensor(cute::Shape<BM, BN>{}));
      } else {
        return tScS;
      }
    };
    const float scale_log2 = kMod != kernels::ScoreMod::plain ? 1.f : p.score.scale_log2;

    // The staged bias (the bias kinds, a bias whose layout allows 16-byte loads): loaded into
    // dS's buffer at the start of each visit and read back in the S fragment's layout through
    // the partition that later stores dS, so that each thread reads exactly the elements it
    // overwrites with dS (no barrier between the two).
    [[maybe_unused]] bool bias_smem = false;
    if constexpr (kStagedBias) bias_smem = p.bias_vec && p.bias != nullptr;
    [[maybe_unused]] auto bias_bh_of = [&](int head) __attribute__((always_inline)) {
      return static_cast<const Element*>(p.bias) + b * p.bias_strides.b + head * p.bias_strides.h;
    };
    [[maybe_unused]] auto staged_bias = [&](auto& acc) __attribute__((always_inline)) {
      if constexpr (kStagedBias) {
        if (bias_smem) {
          cp_async_wait<T::kQStages == 2 ? 1 : 0>();  // this thread's bias chunks ...
          __syncthreads();                            // ... and everyone's
          Tensor rb = make_tensor<Element>(acc.layout());
          copy(ps_copy, tPsdS, ps_thr.retile_S(rb));
          CUTE_UNROLL
          for (int i = 0; i < size(acc); ++i) acc(i) += static_cast<float>(rb(i)) * kernels::kLog2e;
          return true;
        }
      }
      return false;
    };

    // This visit's (query head, query tile) and the next one's, counted rather than divided out
    // of the visit index.
    // Query tile fastest; heads fastest for a dBias summed over a GQA group's heads (bias kinds,
    // bwd_params.h: heads_inner).
    int h = h_first, m_idx = qt.begin;
    [[maybe_unused]] bool heads_inner = false;
    if constexpr (kernels::has_bias_code(kMod)) heads_inner = p.heads_inner;
    auto next = [&](int& nh, int& nm) {
      if (kernels::has_bias_code(kMod) && heads_inner) {
        nh = h + 1;
        nm = m_idx;
        if (nh == h_first + p.group) {
          nh = h_first;
          ++nm;
        }
      } else {
        nh = h;
        nm = m_idx + 1;
        if (nm == qt.end) {
          nm = qt.begin;
          ++nh;
        }
      }
    };
    CUTE_NO_UNROLL
    for (int visit = 0; visit < visits; ++visit) {
      const int buf = T::kQStages == 2 ? visit & 1 : 0;
      const int m0 = m_idx * kBlockM;
      const int64_t row_base = p.ws_row<kBlockM, kServing>(b, h, q0, m0);

      cp_async_wait<0>();  // this visit's Q and dO (and K, V) have landed ...
      // A broadcast dBias (bias kinds): the pair's turn on the tile, waited for here (the barrier
      // tells every thread whether the tile's partial sum holds data) and taken with dS below.
      [[maybe_unused]] bool dbias_has_sum = false;
      if (kernels::has_bias_code(kMod) && p.dbias_sum != nullptr) {
        int has_sum = 0;
        if (tid == 0) has_sum = dbias_wait_turn(dbias_turn<T>(p, b, h, m_idx, blk.n_block));
        dbias_has_sum = __syncthreads_or(has_sum);  // ... everyone's; and every warp is done
                                                    // with the previous visit
        if (dbias_has_sum) {
          const DbiasTurn t = dbias_turn<T>(p, b, h, m_idx, blk.n_block);
          if (t.last) dbias_prefetch<T>(t, tid);
        }
      } else {
        __syncthreads();  // ... everyone's; and every warp is done with the previous visit
      }
      // The bias tile of this visit, staged in dS's buffer (free until dS is written): issued
      // first, waited for where the scores need it, under the S (and dP) products.
      if constexpr (kStagedBias) {
        if (bias_smem) {
          auto gthr = gmem_load.get_thread_slice(kernels::opaque(tid));
          kernels::cp_async_rows_partial(
              gthr, bias_bh_of(h) + static_cast<int64_t>(m0) * p.bias_strides.s + n0,
              static_cast<int>(p.bias_strides.s), sdS, p.s_q - m0, p.s_kv - n0);
          cp_async_fence();
        }
      }
      int next_h, next_m;
      next(next_h, next_m);
      if constexpr (T::kQStages == 2) {
        if (visit + 1 < visits) load_q_do(next_h, next_m, buf ^ 1);
        cp_async_fence();
      }

      float lse2[kRows], delta[kRows];
      load_row_stats(p, row_base, tScS, lse2, delta);

      // S = Q K^T, dP = dO V^T; P = 2^(s2 - lse2), stored to shared memory between the two
      // products or after them (T::kStorePFirst); dS = P (dP - delta).
      Tensor acc_s = partition_fragment_C(mma_sdp, cute::Shape<BM, BN>{});
      clear(acc_s);
      kernels::gemm_smem_smem(mma_sdp, acc_s, tSrQ, tSrK, tSsQ(_, _, _, buf), tSsK, tSrQ_v, tSrK_v,
                              sdp_copy_a, sdp_copy_b);
      Tensor dtanh = make_tensor<float>(acc_s.layout());
      auto s = kernels::acc_row_col(acc_s);
      auto store_p = [&]() __attribute__((always_inline)) {
        backward_scores<T, kMod>(acc_s, dtanh, visit_coords(), p, b, h, m0, n0, qt, blk.sq_b,
                                 blk.skv_b, staged_bias);
        CUTE_UNROLL
        for (int r = 0; r < kRows; ++r) {
          CUTE_UNROLL
          for (int c = 0; c < size<1>(s); ++c) {
            s(r, c) = kernels::fast_exp2(s(r, c) * scale_log2 - lse2[r]);
          }
        }
        Tensor rP = kernels::convert_fragment<Element>(acc_s);
        copy(ps_copy, ps_thr.retile_S(rP), tPsP);
      };
      if constexpr (T::kStorePFirst) store_p();
      Tensor acc_dp = partition_fragment_C(mma_sdp, cute::Shape<BM, BN>{});
      clear(acc_dp);
      kernels::gemm_smem_smem(mma_sdp, acc_dp, tdPrdO, tdPrV, tdPsdO(_, _, _, buf), tdPsV, tdPrdO_v,
                              tdPrV_v, sdp_copy_a, sdp_copy_b);
      if constexpr (!T::kStorePFirst) store_p();
      auto dp = kernels::acc_row_col(acc_dp);
      CUTE_UNROLL
      for (int r = 0; r < kRows; ++r) {
        CUTE_UNROLL
        for (int c = 0; c < size<1>(s); ++c) {
          dp(r, c) = s(r, c) * (dp(r, c) - delta[r]);  // dS, natural units
        }
      }
      // The bias kind's dBias leaves from dS's shared-memory tile below, where its layout allows
      // 16-byte stores (dbias_vec); else (and in the other kinds) element by element from here.
      bool dbias_here = p.dbias != nullptr;
      if constexpr (kStagedDbias) dbias_here = dbias_here && !p.dbias_vec;
      if (dbias_here) {
        Element* dbias_bh =
            static_cast<Element*>(p.dbias) + b * p.dbias_strides.b + h * p.dbias_strides.h;
        auto c = kernels::acc_row_col(tScS);
        CUTE_UNROLL
        for (int r = 0; r < kRows; ++r) {
          const int row = m0 + get<0>(c(r, 0));
          if (row >= p.s_q) continue;
          CUTE_UNROLL
          for (int j = 0; j < size<1>(s); ++j) {
            const int col = n0 + get<1>(c(r, j));
            if (col < p.s_kv)
              dbias_bh[row * p.dbias_strides.s + col] = static_cast<Element>(dp(r, j));
          }
        }
      }
      if constexpr (kernels::has_bias_code(kMod)) {
        if (p.dbias_sum != nullptr) {
          // The turn recomputed rather than kept live across the products (an opaque index, so
          // that the compiler cannot reuse the pointers of the visit's start).
          dbias_add<T>(p, dbias_turn<T>(p, b, h, kernels::opaque(m_idx), blk.n_block),
                       dbias_has_sum, acc_dp, tScS, b, h, m0, n0, tid);
        }
      }
      if constexpr (kernels::has_softcap_code(kMod)) {
        CUTE_UNROLL
        for (int i = 0; i < size(acc_dp); ++i) acc_dp(i) *= dtanh(i);
      }

      // dS to shared memory, for the transposed reads.
      Tensor rdS = kernels::convert_fragment<Element>(acc_dp);
      copy(ps_copy, ps_thr.retile_S(rdS), tPsdS);
      __syncthreads();
      if constexpr (kernels::has_bias_code(kMod)) {
        if (p.dbias_sum != nullptr && tid == 0) {
          dbias_publish(dbias_turn<T>(p, b, h, kernels::opaque(m_idx), blk.n_block), dbias_has_sum);
        }
      }
      if constexpr (kStagedDbias) {
        // Without a softcap factor dS is dBias, rounded the same way: out of shared memory with
        // 16-byte stores instead of scattered 2-byte ones.
        if (p.dbias_vec) {
          typename T::GmemStore gmem_store;
          kernels::store_rows_partial(gmem_store.get_thread_slice(kernels::opaque(tid)), sdS,
                                      static_cast<Element*>(p.dbias) + b * p.dbias_strides.b +
                                          h * p.dbias_strides.h +
                                          static_cast<int64_t>(m0) * p.dbias_strides.s + n0,
                                      static_cast<int>(p.dbias_strides.s), p.s_q - m0, p.s_kv - n0);
        }
      }

      // dV += P^T dO.
      kernels::gemm_smem_smem(mma_dkv, acc_dv, tdKVrA, tdVrdOt, visit_part(tdVsPt, dkv_copy_a, sPt),
                              visit_part(tdVsdOt, dkv_copy_b, sdOt)(_, _, _, buf), tdKVrA_v,
                              tdVrdOt_v, dkv_copy_a, dkv_copy_b);

      // dQ accumulator += dS K, issued before the dK product so that the reductions travel to L2
      // under it.
      Tensor acc_dq = partition_fragment_C(mma_dq, cute::Shape<BM, DQK>{});
      clear(acc_dq);
      kernels::gemm_smem_smem(mma_dq, acc_dq, tdQrdS, tdQrKt, tdQsdS, tdQsKt, tdQrdS_v, tdQrKt_v,
                              dq_copy_a, dq_copy_b);
      int32_t* sem = nullptr;
      if (p.deterministic) {
        sem = p.dq_sem + (static_cast<int64_t>(b) * p.h_q + h) * p.num_m_blocks + m0 / kBlockM;
        if (tid == 0) {
          const kernels::KeyTiles kt =
              kernels::key_tiles(p.score.mask, p.score.has_mask, m0,
                                 min(m0 + kBlockM, blk.sq_b) - 1, blk.sq_b, blk.skv_b, kBlockN);
          wait_for(sem, ~0, blk.n_block - kt.begin);
        }
        __syncthreads();
      }
      dq_accum_add<T::kThreads>(p.dq_accum + row_base * T::kDqk, acc_dq, tid);
      if (p.deterministic) {
        // Every warp's additions are issued; one thread publishes them (a gpu-scope release
        // after the barrier is cumulative). A fence in every thread cost the mode 10 points
        // (x1.27 against x1.17 at d128 S 4096, H200).
        __syncthreads();
        if (tid == 0) release_add(sem, 1);
      }

      // dK += dS^T Q.
      kernels::gemm_smem_smem(mma_dkv, acc_dk, tdKVrA, tdKrQt,
                              visit_part(tdKsdSt, dkv_copy_a, sdSt),
                              visit_part(tdKsQt, dkv_copy_b, sQt)(_, _, _, buf), tdKVrA_v, tdKrQt_v,
                              dkv_copy_a, dkv_copy_b);
      if constexpr (T::kQStages == 1) {
        if (visit + 1 < visits) {
          __syncthreads();  // every warp is done with this visit's Q and dO
          load_q_do(next_h, next_m, 0);
        }
        cp_async_fence();
      }
      h = next_h;
      m_idx = next_m;
    }
  }
};

}  // namespace floe::detail::sm80
