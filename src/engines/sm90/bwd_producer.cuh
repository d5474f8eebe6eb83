// sm90 backward: what the main kernels share around their consumers. The visits of a CTA (every
// query tile of every query head of its kv group that sees one of its keys) and a cursor over
// them, the ring's barriers, and the producer: one thread loads K and V once, then for each visit
// Q with its LSE and dO with its Delta (TMA, plus one bulk copy of the tile's dense floats each)
// into a kStages ring, each stage with a full barrier (transaction bytes) and an empty barrier
// (every consumer thread arrives once the stage's products are done). Also the shared-memory
// helpers of the consumers (padding rows zeroed, descriptors rebuilt a visit). sm_90a device
// code only.
#pragma once

#include <cstdint>

#include <cutlass/arch/barrier.h>
#include <cute/arch/copy_sm90.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/tensor.hpp>

#include "engines/sm90/bwd_params.h"
#include "kernels/band_tiles.cuh"
#include "kernels/tile_scheduler.cuh"

namespace floe::detail::sm90 {

namespace bwd {

using Barrier = cutlass::arch::ClusterBarrier;
using TxBarrier = cutlass::arch::ClusterTransactionBarrier;
inline constexpr int kConsumersBarrier = 0;  // named barrier of all consumer threads

// Zeroes rows [first_row, rows) of a [d / 64][rows][64] SW128 tile: whole 128-byte lines (the
// swizzle permutes 16-byte pieces within a line). Every consumer thread calls it; the caller
// fences and syncs.
template <int kRows, int kD, int kThreads, class Element>
__device__ __forceinline__ void zero_rows(Element* tile, int first_row, int ctid) {
  constexpr int kChunks = kD / 64;
  const int rows = kRows - first_row;
  uint4* base = reinterpret_cast<uint4*>(tile);
  for (int i = ctid; i < rows * kChunks * 8; i += kThreads) {
    const int piece = i % 8, line = i / 8;
    const int row = first_row + line % rows, chunk = line / rows;
    base[(chunk * kRows + row) * 8 + piece] = make_uint4(0, 0, 0, 0);
  }
}

// A pointer the compiler must treat as new on every use (see the main loop).
template <class P>
__device__ __forceinline__ P* opaque(P* p) {
  asm volatile("" : "+l"(p));
  return p;
}

// The visits of a CTA in order: query head of the group (outer), query tile (inner).
struct Visits {
  int h0, m_begin, n_m, count;
};

// Walks the visits in order without a division per visit (the producer and the dQ reducer run
// at 24 registers).
struct VisitCursor {
  int h, m_block;
  __device__ __forceinline__ explicit VisitCursor(const Visits& vs)
      : h(vs.h0), m_block(vs.m_begin) {}
  __device__ __forceinline__ void next(const Visits& vs) {
    if (++m_block == vs.m_begin + vs.n_m) {
      m_block = vs.m_begin;
      ++h;
    }
  }
};

// A main kernel's CTA: its key tile (from blockIdx), the batch's lengths, the query tiles that see
// its keys and the visits over them.
struct KeyTileVisits {
  kernels::KeyTile tile;
  int sq_b, skv_b, n0;
  kernels::QueryTiles qt;
  Visits visits;
};

template <class T>
__device__ __forceinline__ KeyTileVisits key_tile_visits(const BwdParams& p) {
  KeyTileVisits k;
  k.tile = kernels::KeyTileScheduler::tile(p.key_tiles, blockIdx.x);
  k.sq_b = p.lens.q_len(k.tile.b, p.s_q);
  k.skv_b = p.lens.kv_len(k.tile.b, p.s_kv);
  k.n0 = k.tile.n_block * T::kBlockN;
  if (k.n0 < k.skv_b) {
    k.qt = kernels::query_tiles(p.score.mask, p.score.has_mask, k.n0,
                                min(k.n0 + T::kBlockN, k.skv_b) - 1, k.sq_b, k.skv_b, T::kBlockM);
  }
  const int n_m = k.qt.empty() ? 0 : k.qt.end - k.qt.begin;
  k.visits = Visits{k.tile.h_kv * p.group, k.qt.begin, n_m, n_m * p.group};
  return k;
}

// The barriers of K/V and of the Q/dO ring (one thread; the caller fences the init).
template <class T, class Storage>
__device__ __forceinline__ void init_ring_barriers(Storage& ss) {
  TxBarrier::init(&ss.kv_full, 1);
  CUTE_UNROLL
  for (int s = 0; s < T::kStages; ++s) {
    TxBarrier::init(&ss.q_full[s], 1);
    TxBarrier::init(&ss.do_full[s], 1);
    Barrier::init(&ss.q_empty[s], T::kConsumerThreads);
    Barrier::init(&ss.do_empty[s], T::kConsumerThreads);
  }
}

// The producer thread: the bias tile of (queries m0.., keys n0..) of head h, batch b into stage
// `stage` of the ring, counted on `full` (whose expected bytes include kBiasBytes).
template <class T, class Storage>
__device__ __forceinline__ void load_bias_tile(const BwdParams& p, Storage& ss, uint64_t* full,
                                               int stage, int m0, int n0, int h, int b) {
  constexpr uint64_t kCacheHint = static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_NORMAL);
  constexpr int kStageElems = T::kBlockM * T::kBlockN;
  CUTE_UNROLL
  for (int c = 0; c < T::kBlockN / 64; ++c) {
    cute::SM90_TMA_LOAD_4D::copy(&p.tma_bias, full, kCacheHint,
                                 ss.bias.data() + stage * kStageElems + c * T::kBlockM * 64,
                                 n0 + 64 * c, m0, h * p.bias_h_step, b * p.bias_b_step);
  }
}

// The producer thread: K and V of the key tile at n0, then each visit's Q, LSE, dO and Delta into
// the ring once the consumers have emptied the stage.
template <class T, class Storage>
__device__ __forceinline__ void produce_visits(const BwdParams& p, Storage& ss,
                                               const Visits& visits, int n0, int h_kv, int b) {
  using namespace cute;
  constexpr int kStages = T::kStages;
  constexpr uint64_t kCacheHint = static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_NORMAL);
  TxBarrier::arrive_and_expect_tx(&ss.kv_full, T::kKBytes + T::kVBytes);
  SM90_TMA_LOAD_5D::copy(&p.tma_k, &ss.kv_full, kCacheHint, ss.k.data(), 0, n0, 0, h_kv, b);
  SM90_TMA_LOAD_5D::copy(&p.tma_v, &ss.kv_full, kCacheHint, ss.v.data(), 0, n0, 0, h_kv, b);
  constexpr int kStageElems = T::kBlockM * T::kD;
  constexpr int kDoStageElems = T::kBlockM * T::kDv;
  VisitCursor at(visits);
  CUTE_NO_UNROLL
  for (int v = 0; v < visits.count; ++v, at.next(visits)) {
    const int stage = v % kStages;
    const uint32_t phase = (v / kStages) & 1;
    const int h = at.h;
    const int m0 = at.m_block * T::kBlockM;
    const int64_t row0 = (static_cast<int64_t>(b) * p.h_q + h) * p.s_q_pad + m0;
    Barrier::wait(&ss.q_empty[stage], phase ^ 1);
    TxBarrier::arrive_and_expect_tx(&ss.q_full[stage],
                                    T::kQBytes + T::kRowStatBytes + T::kBiasBytes);
    SM90_TMA_LOAD_5D::copy(&p.tma_q, &ss.q_full[stage], kCacheHint,
                           ss.q.data() + stage * kStageElems, 0, m0, 0, h, b);
    if constexpr (T::kBias) load_bias_tile<T>(p, ss, &ss.q_full[stage], stage, m0, n0, h, b);
    SM90_BULK_COPY_G2S::copy(p.lse_log2 + row0, &ss.q_full[stage], ss.lse[stage], T::kRowStatBytes);
    Barrier::wait(&ss.do_empty[stage], phase ^ 1);
    TxBarrier::arrive_and_expect_tx(&ss.do_full[stage], T::kDoBytes + T::kRowStatBytes);
    SM90_TMA_LOAD_5D::copy(&p.tma_do, &ss.do_full[stage], kCacheHint,
                           ss.d_o.data() + stage * kDoStageElems, 0, m0, 0, h, b);
    SM90_BULK_COPY_G2S::copy(p.delta + row0, &ss.do_full[stage], ss.delta[stage], T::kRowStatBytes);
  }
}

}  // namespace bwd

}  // namespace floe::detail::sm90
