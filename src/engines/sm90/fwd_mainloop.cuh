// sm90 forward: the main loop of one CTA, in its two roles.
//
// load(): one thread of the producer warpgroup issues TMA for the Q tile (once), then for each
// key tile K and V into `kStages`-deep rings, each stage guarded by a full barrier (TMA's
// transaction bytes) and an empty barrier (every consumer thread arrives once it has read it).
//
// compute(): the two consumer warpgroups (64 query rows each) run, per key tile, S = Q K^T (SS
// GMMA), in the score-mod kernel the score mods (kernels/score_mod.cuh: softcap, then the bias tile
// the producer staged beside K and V), the boundary mask, the online softmax in base 2, and
// O += P V (RS GMMA, P converted in registers). Within a warpgroup the products overlap the
// softmax: S_t and P_{t-1} V_{t-1} are issued together and the softmax of S_t runs while the second
// one computes. Tiles the band or the key length cuts run a masked copy of the step; the others a
// copy with no mask code. Both roles walk the tiles in the same order (tile_at).
#pragma once

#include <cutlass/arch/barrier.h>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/tensor.hpp>

#include "engines/sm90/fwd_params.h"
#include "engines/sm90/gmma_fragment.cuh"
#include "kernels/band_tiles.cuh"
#include "kernels/mask.cuh"
#include "kernels/score_mod.cuh"
#include "kernels/sm90/softcap_split.cuh"

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

// Named barriers of the consumer warpgroups (past CUTLASS's reserved ids, which NamedBarrier
// adds): one for both, and one per warpgroup for the pingpong turns.
inline constexpr int kConsumersBarrier = 0;
inline constexpr int kTurnBarrier = 1;  // + consumer warpgroup index
using TxBarrier = cutlass::arch::ClusterTransactionBarrier;

template <class T>
struct FwdMainloop {
  using Element = typename T::Element;
  using Storage = typename T::SharedStorage;
  static constexpr int kStages = T::kStages;
  static constexpr uint64_t kCacheHint =
      static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_NORMAL);

  // A side's batch coordinate in its tensor map: 0 for a packed side of the serving kernel
  // (its map has no batch dim), b for a dense one.
  __device__ __forceinline__ static int batch_coordinate(bool packed, int b) {
    return T::kServing && packed ? 0 : b;
  }

  // One thread, one query tile. h_kv: the kv head; the order of tiles is the consumers'. it0: the
  // key tiles the rings have carried before this query tile (the CTA's earlier tiles), so stage
  // and phase continue where they left off. q_phase: the parity the Q buffer's empty barrier
  // completes for this tile. K and V of the first key tile go first: their stages free up under
  // the previous tile's last products, while the Q buffer waits for its epilogue. The serving
  // kernel's map of a packed side is the packed [T, h, d] tensor as [1, h, T, d]: a tile's rows
  // start at its slot's first token (q0, kv0) and the batch coordinate is 0; a dense side beside
  // it keeps its [b, h, s, d] map, batch coordinate b and first row 0 (batch_rows gives q0 or
  // kv0 = 0 there). Rows past the batch's keys (the next slot's, or zeros past T) are masked,
  // and V's zeroed (compute); Q rows past sq_b are never written out.
  // A paged cache (serving kernel, p.serve.paged_kv) takes each key tile box by box from its
  // pages (load_paged).
  __device__ __forceinline__ static void load(const FwdParams& p, Storage& ss, int m0, int h,
                                              int h_kv, int b, const TileOrder& order, int it0,
                                              uint32_t q_phase, int sq_b, int q0, int kv0,
                                              int skv_b) {
    const int kb = batch_coordinate(p.serve.ragged_kv, b);
    const int kv_row0 = T::kServing ? kv0 : 0;
    const bool paged = T::kServing && p.serve.paged_kv;
    for (int t = 0; t < order.n_tiles; ++t) {
      const int i = it0 + t;
      const int stage = i % kStages;
      const uint32_t phase = (i / kStages) & 1;
      const int n0 = order.at(t) * T::kBlockN;
      // A paged tile's table reads before the wait for its stage: they run under it.
      PagedBoxes boxes;
      if (paged) boxes = PagedBoxes::lookup(p, n0, b, skv_b);
      // A fresh barrier is in phase 0: waiting for the parity of phase 1 returns at once, so the
      // first pass over the ring does not wait.
      Barrier::wait(&ss.k_empty[stage], phase ^ 1);
      TxBarrier::arrive_and_expect_tx(&ss.k_full[stage], T::kKBytes);
      if (paged) {
        load_paged<T::kD>(p, boxes, &p.tma_k, &ss.k_full[stage],
                          ss.k.data() + stage * T::kBlockN * T::kD, n0, h_kv, b, skv_b);
      } else {
        cute::SM90_TMA_LOAD_5D::copy(&p.tma_k, &ss.k_full[stage], kCacheHint,
                                     ss.k.data() + stage * T::kBlockN * T::kD, 0, kv_row0 + n0, 0,
                                     h_kv, kb);
      }
      if constexpr (T::kScoreMod) {
        if (p.has_bias) {
          load_bias(p, ss, i % T::kBiasStages, (i / T::kBiasStages) & 1, m0, n0, h, b);
        }
      }
      if (t == 0) load_q(p, ss, m0, h, b, q_phase, sq_b, q0);
      Barrier::wait(&ss.v_empty[stage], phase ^ 1);
      TxBarrier::arrive_and_expect_tx(&ss.v_full[stage], T::kVBytes);
      if (paged) {
        load_paged<T::kDv>(p, boxes, &p.tma_v, &ss.v_full[stage],
                           ss.v.data() + stage * T::kBlockN * T::kDv, n0, h_kv, b, skv_b);
      } else {
        cute::SM90_TMA_LOAD_5D::copy(&p.tma_v, &ss.v_full[stage], kCacheHint,
                                     ss.v.data() + stage * T::kBlockN * T::kDv, 0, kv_row0 + n0, 0,
                                     h_kv, kb);
      }
    }
  }

  // The pages of one key tile's boxes, read from the block table before its first copy where the
  // plan asks for it (p.paged_batched: pages smaller than the tile, at most kMax boxes; 16 rows
  // and up at d128): the reads then overlap, one latency a tile, and K's and V's boxes share
  // them, where the per-box path waits out a read before each box, for K and again for V. Each
  // box starts a page; boxes past the batch's keys take page 0 without a read (load_paged).
  struct PagedBoxes {
    static constexpr int kMax = kPagedBatchMaxBoxes;
    int page[kMax];

    __device__ __forceinline__ static PagedBoxes lookup(const FwdParams& p, int n0, int b,
                                                        int skv_b) {
      if (p.paged_batched == 0) return PagedBoxes{};
      PagedBoxes x;
      const int box_rows = p.paged_box_rows;
      CUTE_UNROLL
      for (int i = 0; i < kMax; ++i) {
        const int r = i * box_rows;
        int row;  // page_of's row within the page: 0, each box starting its page
        x.page[i] = r < T::kBlockN && n0 + r < skv_b
                        ? static_cast<int>(kernels::page_of(p.serve, b, n0 + r, &row))
                        : 0;
      }
      return x;
    }
  };

  // One key tile (keys n0..) of a paged cache, whose map is [pages, P, h_kv, d] as {64, P, d / 64,
  // h_kv, pages}: boxes of R = p.paged_box_rows rows and one 64-column chunk, each from the page
  // that holds its first key. The plan takes R = min(P, block_n), with P a multiple of block_n or
  // a divisor of it (fwd_plan.cc's check_page_size), so that no box straddles two pages, and R a
  // multiple of 8, the 128-byte swizzle's period, so that a box written at row r of the
  // [cols / 64][block_n][64] tile lands in phase. Every box is issued (the stage expects the whole
  // tile's bytes); one past the batch's keys reads page 0 without looking at the block table, whose
  // entries there may hold anything (DESIGN 2.2): its K rows are masked and its V rows zeroed like
  // any rows past skv_b (compute).
  template <int kCols>
  __device__ __forceinline__ static void load_paged(const FwdParams& p, const PagedBoxes& boxes,
                                                    const TmaDescriptor* map, uint64_t* full,
                                                    Element* tile, int n0, int h_kv, int b,
                                                    int skv_b) {
    const int box_rows = p.paged_box_rows;
    if (p.paged_batched != 0) {
      CUTE_UNROLL
      for (int i = 0; i < PagedBoxes::kMax; ++i) {
        const int r = i * box_rows;
        if (r >= T::kBlockN) break;
        CUTE_UNROLL
        for (int c = 0; c < kCols / 64; ++c) {
          cute::SM90_TMA_LOAD_5D::copy(map, full, kCacheHint, tile + (c * T::kBlockN + r) * 64, 0,
                                       0, c, h_kv, boxes.page[i]);
        }
      }
      return;
    }
    for (int r = 0; r < T::kBlockN; r += box_rows) {
      int page = 0, row = 0;
      if (n0 + r < skv_b) page = static_cast<int>(kernels::page_of(p.serve, b, n0 + r, &row));
      CUTE_UNROLL
      for (int c = 0; c < kCols / 64; ++c) {
        cute::SM90_TMA_LOAD_5D::copy(map, full, kCacheHint, tile + (c * T::kBlockN + r) * 64, 0,
                                     row, c, h_kv, page);
      }
    }
  }

  // The Q tile, a consumer warpgroup's 64 rows at a time, each once that warpgroup is done with
  // its rows (its last Q K^T where O has a buffer of its own, else its epilogue, which stages O
  // in them). A box is 64 rows of one 64-column chunk (the plan's Q map), written where the
  // [d / 64][block_m][64] tile keeps those rows.
  // The serving kernel: rows at the slot (q0 on), none loaded wholly past the batch's sq_b (the
  // epilogue writes zeros there).
  __device__ __forceinline__ static void load_q(const FwdParams& p, Storage& ss, int m0, int h,
                                                int b, uint32_t q_phase, int sq_b, int q0) {
    CUTE_UNROLL
    for (int w = 0; w < T::kConsumerWarpgroups; ++w) {
      Barrier::wait(&ss.q_empty[w], q_phase ^ 1);
      // Rows wholly past s_q: no load (the warpgroup's products run on what the buffer holds,
      // row by row, and the epilogue writes none of those rows).
      if (m0 + 64 * w >= (T::kServing ? sq_b : p.s_q)) {
        TxBarrier::arrive(&ss.q_full[w]);
        continue;
      }
      TxBarrier::arrive_and_expect_tx(&ss.q_full[w], T::kQRowsBytes);
      CUTE_UNROLL
      for (int c = 0; c < T::kD / 64; ++c) {
        cute::SM90_TMA_LOAD_5D::copy(
            &p.tma_q, &ss.q_full[w], kCacheHint, ss.q.data() + (c * T::kBlockM + 64 * w) * 64, 0,
            (T::kServing ? q0 : 0) + m0 + 64 * w, c, h, batch_coordinate(p.serve.ragged_q, b));
      }
    }
  }

  // The bias tile of (query rows m0.., keys n0..) into the bias ring's `stage`, in boxes of 64
  // keys (TMA zero-fills past s_q and s_kv); a broadcast dim takes coordinate 0 (fwd_params.h).
  // It is read right after S, so it goes with K. With a one-stage ring (d128) the stage frees once
  // the consumers have added the previous tile's bias, before they free V's stage: V is not held
  // up.
  __device__ __forceinline__ static void load_bias(const FwdParams& p, Storage& ss, int stage,
                                                   uint32_t phase, int m0, int n0, int h, int b) {
    constexpr int kStageElems = T::kBlockM * T::kBlockN;
    Barrier::wait(&ss.bias_empty[stage], phase ^ 1);
    TxBarrier::arrive_and_expect_tx(&ss.bias_full[stage], T::kBiasBytes);
    CUTE_UNROLL
    for (int c = 0; c < T::kBlockN / 64; ++c) {
      cute::SM90_TMA_LOAD_4D::copy(&p.tma_bias, &ss.bias_full[stage], kCacheHint,
                                   ss.bias.data() + stage * kStageElems + c * T::kBlockM * 64,
                                   n0 + 64 * c, m0, h * p.bias_h_step, b * p.bias_b_step);
    }
  }

  // V rows past the batch's key length hold whatever the tensor holds there (TMA zero-fills only
  // past s_kv); P is 0 on them, but 0 x NaN is not. Zeroed in shared memory before P V reads
  // them, on the one tile that has them. Every consumer thread calls this.
  __device__ __forceinline__ static void zero_v_rows(Storage& ss, int stage, int first_row,
                                                     int ctid) {
    constexpr int kChunks = T::kDv / 64;  // 128-byte rows per V row
    const int rows = T::kBlockN - first_row;
    uint4* base = reinterpret_cast<uint4*>(ss.v.data() + stage * T::kBlockN * T::kDv);
    // Whole 128-byte lines: the swizzle permutes 16-byte pieces within a line, so the line of
    // (row, chunk) is where it was.
    for (int i = ctid; i < rows * kChunks * 8; i += T::kConsumerThreads) {
      const int piece = i % 8, line = i / 8;
      const int row = first_row + line % rows, chunk = line / rows;
      base[(chunk * T::kBlockN + row) * 8 + piece] = make_uint4(0, 0, 0, 0);
    }
    cutlass::arch::fence_view_async_shared();  // generic-proxy writes, read by GMMA (async proxy)
    cutlass::arch::NamedBarrier::sync(T::kConsumerThreads, kConsumersBarrier);
  }

  // it0: as in load(); the caller has waited for its warpgroup's Q rows. Where O has a buffer
  // of its own, the warpgroup frees its Q rows once its last S is in and softmaxed, so that the
  // next tile's rows load under its last P V and epilogue (else the caller frees them after the
  // epilogue).
  template <class AccO, class Softmax>
  __device__ __forceinline__ static void compute(const FwdParams& p, Storage& ss, int ctid, int m0,
                                                 int skv_b, const kernels::KeyTiles& kt,
                                                 const TileOrder& order, int it0, AccO& acc_o,
                                                 Softmax& softmax) {
    using namespace cute;
    Tensor sQ = make_tensor(make_smem_ptr(ss.q.data()), typename T::SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(ss.k.data()), typename T::SmemLayoutK{});
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

    // The serving kernel's rows past skv_b are the next slot's (or a padded slot's), whatever the
    // envelope: zeroed wherever the batch's last key tile is partial.
    const bool pad_kv = (T::kServing || skv_b < p.s_kv) && skv_b % T::kBlockN != 0;
    // The softmax's scale: the plain kernel folds it into the exponent; so does the score-mod
    // kernel unless a softcap turns the scores into log2 units first (then 1).
    const float scale_log2 = score_unit<T::kScoreMod>(p);

    // S = Q K_t^T, issued (the caller waits).
    auto issue_qk = [&](int t, auto& acc_s) __attribute__((always_inline)) {
      const int stage = (it0 + t) % kStages;
      TxBarrier::wait(&ss.k_full[stage], ((it0 + t) / kStages) & 1);
      gmma<true>(mma_qk, tSrQ, tSrK(_, _, _, stage), acc_s);
    };
    // O += P_t V_t, issued (the caller waits).
    auto issue_pv = [&](int t, auto& tOrP) __attribute__((always_inline)) {
      const int stage = (it0 + t) % kStages;
      TxBarrier::wait(&ss.v_full[stage], ((it0 + t) / kStages) & 1);
      gmma<false>(mma_pv, tOrP, tOrV(_, _, _, stage), acc_o);
    };
    auto release_k = [&](int t) __attribute__((always_inline)) {
      Barrier::arrive(&ss.k_empty[(it0 + t) % kStages]);
    };
    auto release_v = [&](int t) __attribute__((always_inline)) {
      Barrier::arrive(&ss.v_empty[(it0 + t) % kStages]);
    };

    // Score mods (the score-mod kernel), then the mask.
    auto mask = [&](auto& acc_s, int t, auto kind) __attribute__((always_inline)) {
      if constexpr (T::kScoreMod) {
        // The softcap alone needs its scores in log2 units (less the cap: softcap_split.cuh):
        // without one they stay raw q.k (one FMUL an element fewer), the bias in their unit.
        if (p.score.has_softcap) {
          kernels::softcap_folded(acc_s, p.score.tanh_k, p.softcap_neg_a);
        }
        if (p.has_bias) {
          const int i = it0 + t;
          const int stage = i % T::kBiasStages;
          TxBarrier::wait(&ss.bias_full[stage], (i / T::kBiasStages) & 1);
          static_assert(decltype(size<0>(gmma_row_col(acc_s)))::value == 2 &&
                            decltype(size<1>(gmma_row_col(acc_s)))::value == T::kBlockN / 4,
                        "GmmaBiasTile reads one 64 x kBlockN GMMA per warpgroup");
          // Addresses from the opaque thread index: recomputed each tile, not hoisted and kept
          // live.
          const GmmaBiasTile<Element, T::kBlockM> bias(
              ss.bias.data() + stage * T::kBlockM * T::kBlockN, kernels::opaque(ctid));
          kernels::add_bias_tile(gmma_row_col(acc_s), bias, p.bias_unit);
          Barrier::arrive(&ss.bias_empty[stage]);
        }
      }
      constexpr int kMask = decltype(kind)::value;
      if constexpr (kMask != kernels::kNoMask) {
        kernels::mask_scores<kMask>(gmma_row_col(acc_s), gmma_row_col(tScS), m0,
                                    order.at(t) * T::kBlockN, kt.diag_lo, kt.diag_hi, skv_b);
      }
    };

    // P of the previous tile, in the register layout of the P V operand.
    Tensor rP = make_tensor<Element>(
        partition_fragment_C(mma_qk, cute::Shape<typename T::BM, typename T::BN>{}).layout());
    Tensor tOrP = make_tensor(rP.data(), gmma_acc_as_a_layout(rP.layout()));
    auto to_p = [&](auto const& acc_s) __attribute__((always_inline)) {
      CUTE_UNROLL
      for (int i = 0; i < size(acc_s); ++i) rP(i) = static_cast<Element>(acc_s(i));
    };

    // Pingpong: a warpgroup issues its products only on its turn, and hands the turn over once
    // they are issued, so the two alternate on the tensor cores and each one's softmax runs
    // under the other's products. Warpgroup 1 hands warpgroup 0 the first turn of the CTA's first
    // tile (it0 == 0): each warpgroup takes as many turns a tile as it passes, so every later tile
    // starts with the turn at warpgroup 0 (a hand-over per tile would pile up arrivals on a named
    // barrier once a persistent CTA walks several tiles).
    const int wg = ctid / 128;
    auto take_turn = [&]() __attribute__((always_inline)) {
      if constexpr (T::kPingpong) {
        cutlass::arch::NamedBarrier::sync(T::kConsumerThreads, kTurnBarrier + wg);
      }
    };
    auto pass_turn = [&]() __attribute__((always_inline)) {
      if constexpr (T::kPingpong) {
        cutlass::arch::NamedBarrier::arrive(T::kConsumerThreads, kTurnBarrier + (wg ^ 1));
      }
    };
    if (wg == 1 && it0 == 0) pass_turn();

    // Scores -> P; true when O needs rescaling. The score-mod kernel's fixed-max rows
    // (fwd_params.h): every row's max is p.fixed_max (the caller set the rows' max to it), so no
    // row max is taken and O is never rescaled. Else the online softmax.
    auto to_probs = [&](auto& acc_s, auto& correction) __attribute__((always_inline)) {
      if constexpr (T::kScoreMod) {
        if (p.fixed_max_rows) {
          float max_scaled[Softmax::kRowCount];
          CUTE_UNROLL
          for (int r = 0; r < Softmax::kRowCount; ++r) max_scaled[r] = p.fixed_max;
          softmax.exponentiate(gmma_row_col(acc_s), 1.f, max_scaled);
          return false;
        }
      }
      return softmax.scores_to_p(gmma_row_col(acc_s), scale_log2, correction);
    };

    // The first tile alone: O is still zero, so nothing overlaps its softmax.
    auto first = [&](auto kind) __attribute__((always_inline)) {
      Tensor acc_s = partition_fragment_C(mma_qk, cute::Shape<typename T::BM, typename T::BN>{});
      take_turn();
      issue_qk(0, acc_s);
      pass_turn();
      warpgroup_wait<0>();
      release_k(0);
      // Padding rows of V are zeroed here, outside the turns (both warpgroups meet at a barrier).
      if (pad_kv) {
        TxBarrier::wait(&ss.v_full[it0 % kStages], (it0 / kStages) & 1);
        zero_v_rows(ss, it0 % kStages, skv_b - order.at(0) * T::kBlockN, ctid);
      }
      mask(acc_s, 0, kind);
      float correction[Softmax::kRowCount];
      to_probs(acc_s, correction);
      to_p(acc_s);
    };
    // Tile t >= 1: S_t = Q K_t^T and O += P_{t-1} V_{t-1} issued together; the softmax of S_t
    // runs while the second product does; O is rescaled once it is done.
    auto step = [&](int t, auto kind) __attribute__((always_inline)) {
      Tensor acc_s = partition_fragment_C(mma_qk, cute::Shape<typename T::BM, typename T::BN>{});
      take_turn();
      issue_qk(t, acc_s);
      warpgroup_fence_operand(rP);
      issue_pv(t - 1, tOrP);
      pass_turn();
      warpgroup_wait<1>();  // S_t is in
      release_k(t);
      mask(acc_s, t, kind);
      float correction[Softmax::kRowCount];
      const bool grew = to_probs(acc_s, correction);
      warpgroup_wait<0>();  // P_{t-1} V_{t-1} is in: rP and V_{t-1} are free
      warpgroup_fence_operand(rP);
      release_v(t - 1);
      Softmax::rescale_o(gmma_row_col(acc_o), correction, grew);
      to_p(acc_s);
    };

    // The masked tiles take the one-sided mask when none of them has a key left of the band:
    // decided once, a loop for each; then the unmasked tiles, with no mask code.
    const bool one_sided = kt.begin * T::kBlockN - (m0 + T::kBlockM - 1) >= kt.diag_lo;
    if (order.n_masked == 0) {
      first(Int<kernels::kNoMask>{});
    } else if (one_sided) {
      first(Int<kernels::kMaskRight>{});
    } else {
      first(Int<kernels::kMaskBand>{});
    }
    int t = 1;
    if (one_sided) {
      CUTE_NO_UNROLL
      for (; t < order.n_masked; ++t) step(t, Int<kernels::kMaskRight>{});
    } else {
      CUTE_NO_UNROLL
      for (; t < order.n_masked; ++t) step(t, Int<kernels::kMaskBand>{});
    }
    CUTE_NO_UNROLL
    for (; t < order.n_tiles; ++t) step(t, Int<kernels::kNoMask>{});

    // Every Q K^T is in: where O has a buffer of its own, this warpgroup's Q rows are free. (A
    // release inside the last step, one softmax earlier, measured the same within noise on the
    // H200 and adds a test to the step's loop.)
    if constexpr (T::kOwnO) Barrier::arrive(&ss.q_empty[ctid / 128]);
    warpgroup_fence_operand(rP);
    take_turn();
    issue_pv(order.n_tiles - 1, tOrP);
    pass_turn();
    warpgroup_wait<0>();
    warpgroup_fence_operand(rP);
    release_v(order.n_tiles - 1);
  }
};

}  // namespace floe::detail::sm90
