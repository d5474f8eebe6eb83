// sm80 backward: the gradient of a bias broadcast over the batch or the heads, summed by the main
// kernel's own CTAs from the dS they compute anyway (no kernel of its own, no product computed
// twice, no dS buffer of the problem's size).
//
// dBias[bb, bh] is the sum of dS over the (batch, head) pairs the bias broadcasts to, in a fixed
// order: the pair's turn = its batch among the broadcast batches x the broadcast heads + its head
// among them. Each tile of the bias (query tile x key tile) has an fp32 partial sum in the
// main kernel's thread order ("dbias_accum", bwd_dq_accum.cuh) and a semaphore (the turns taken;
// bit 30: the partial sum holds data). A CTA that visits the tile for a pair waits, at the start
// of the visit, until the turns before the pair's are taken; with its dS it then stores the
// partial sum (the first turn with data), adds to it (reductions in L2; the order of the turns
// makes the fp32 sum the same bits on every run, P7), or, on the last turn, adds its dS to the
// partial sum and writes dBias. A CTA takes its turns on the tiles it does not visit (band,
// lengths) after its main loop: it counts them, and on the last turn writes the partial sum or
// zeros.
//
// Every wait ends: a lower turn belongs to the CTA itself (a lower head of its group, visited or
// passed before) or to a CTA of lower linear index (a lower batch, or a lower kv head of the same
// batch), which the hardware has dispatched already. Summed over the batch of an MHA problem, a
// tile's turns are a whole batch of CTAs apart: nothing waits, and each turn's partial sum makes
// a round trip to memory (the last turn prefetches it at the start of its visit). Summed over
// the heads of a GQA group, each CTA visits the group's heads of one query tile before the next
// query tile (bwd_params.h: heads_inner), so that a kv head's CTA waits one query tile, not a
// whole group of heads, for the previous kv head's turns (head-major visits: x3.4 slower, see
// the sm80 README). Running the batch fastest (a tile's turns on neighbouring CTAs, the partial
// sum in L2) measured slower (README).
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm80/bwd_dq_accum.cuh"
#include "engines/sm80/bwd_params.h"
#include "engines/sm80/bwd_semaphore.cuh"
#include "kernels/band_tiles.cuh"
#include "kernels/sm80/fragment.cuh"

namespace floe::detail::sm80 {

constexpr int32_t kDbiasHasSum = 1 << 30;

// One pair's turn on one tile of a broadcast dBias.
struct DbiasTurn {
  float* accum;  // the tile's partial sum
  int32_t* sem;
  int turn;
  bool last;
};

template <class T>
__device__ __forceinline__ DbiasTurn dbias_turn(const BwdParams& p, int b, int h, int m_block,
                                                int n_block) {
  const bool over_b = p.bias_b == 1, over_h = p.bias_h == 1;
  const int heads = over_h ? p.h_q : 1;
  const int turns = (over_b ? p.b : 1) * heads;
  const int turn = (over_b ? b : 0) * heads + (over_h ? h : 0);
  const int64_t tile =
      ((static_cast<int64_t>(over_b ? 0 : b) * p.bias_h + (over_h ? 0 : h)) * p.num_m_blocks +
       m_block) *
          p.num_n_blocks +
      n_block;
  return DbiasTurn{p.dbias_accum + tile * (T::kBlockM * T::kBlockN), p.dbias_sem + tile, turn,
                   turn == turns - 1};
}

// The dBias tile of pair (b, h) in the output: its (bias batch, bias head) and first element.
template <class T>
__device__ __forceinline__ typename T::Element* dbias_out(const BwdParams& p, int b, int h, int m0,
                                                          int n0) {
  return static_cast<typename T::Element*>(p.dbias_sum) +
         (p.bias_b == 1 ? 0 : b) * p.dbias_strides.b + (p.bias_h == 1 ? 0 : h) * p.dbias_strides.h +
         static_cast<int64_t>(m0) * p.dbias_strides.s + n0;
}

// The dBias tile at `out` = ds + the partial sum (when has_sum), both in the S fragment's
// layout, rows past s_q and keys past s_kv left out; four elements at a time (the partial sum
// read with one 16-byte load on sm_90), so that few registers are live beside the main loop's.
template <class T, class DS, class Coord, class Element>
__device__ __forceinline__ void dbias_write(const BwdParams& p, const float* accum, bool has_sum,
                                            const DS& ds, Coord const& tScS, Element* out, int m0,
                                            int n0, int tid) {
  using namespace cute;
  static_assert(decltype(size(ds))::value % 4 == 0, "whole float4 chunks");
  CUTE_UNROLL
  for (int j = 0; j < size(ds) / 4; ++j) {
    const float4 a =
        has_sum ? accum_load4<T::kThreads>(accum, j, tid) : make_float4(0.f, 0.f, 0.f, 0.f);
    const float add[4] = {a.x, a.y, a.z, a.w};
    CUTE_UNROLL
    for (int k = 0; k < 4; ++k) {
      const int row = get<0>(tScS(4 * j + k));
      const int col = get<1>(tScS(4 * j + k));
      if (m0 + row < p.s_q && n0 + col < p.s_kv) {
        out[row * p.dbias_strides.s + col] = static_cast<Element>(ds(4 * j + k) + add[k]);
      }
    }
  }
}

// Thread 0, at the start of a visit: waits for the pair's turn on the tile and says whether the
// partial sum holds data (the caller broadcasts it with the visit's barrier).
__device__ __forceinline__ bool dbias_wait_turn(const DbiasTurn& t) {
  return (wait_for(t.sem, kDbiasHasSum - 1, t.turn) & kDbiasHasSum) != 0;
}

// Every thread, after that barrier, on the last turn: the partial sum towards L2 (one 128-byte
// line a thread at a time), read after the visit's products.
template <class T>
__device__ __forceinline__ void dbias_prefetch(const DbiasTurn& t, int tid) {
  CUTE_UNROLL
  for (int x = tid * 32; x < T::kBlockM * T::kBlockN; x += T::kThreads * 32) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(t.accum + x));
  }
}

// Every thread, with the visit's dS (natural units, before a softcap factor) in the S fragment's
// layout: the pair's share of the tile (see the top of the file). The caller's next barrier, then
// dbias_publish, ends the turn.
template <class T, class DS, class Coord>
__device__ __forceinline__ void dbias_add(const BwdParams& p, const DbiasTurn& t, bool has_sum,
                                          const DS& ds, Coord const& tScS, int b, int h, int m0,
                                          int n0, int tid) {
  if (t.last) {
    dbias_write<T>(p, t.accum, has_sum, ds, tScS, dbias_out<T>(p, b, h, m0, n0), m0, n0, tid);
  } else if (has_sum) {
    dq_accum_add<T::kThreads>(t.accum, ds, tid);
  } else {
    accum_store<T::kThreads>(t.accum, ds, tid);
  }
}

// Thread 0, after the barrier that follows every thread's dbias_add: the next turn may start.
__device__ __forceinline__ void dbias_publish(const DbiasTurn& t, bool has_sum) {
  if (!t.last) release_add(t.sem, has_sum ? 1 : 1 + kDbiasHasSum);
}

// After the main loop: the CTA's turns on the tiles of its key tile that it did not visit (query
// tiles outside [qt.begin, qt.end), every query head of its group).
template <class T>
__device__ __forceinline__ void dbias_pass_unvisited(const BwdParams& p, int tid,
                                                     const BwdBlock& blk,
                                                     const kernels::QueryTiles& qt) {
  using namespace cute;
  for (int g = 0; g < p.group; ++g) {
    const int h = blk.h_kv * p.group + g;
    for (int m_block = 0; m_block < p.num_m_blocks; ++m_block) {
      if (!qt.empty() && m_block >= qt.begin && m_block < qt.end) continue;
      const DbiasTurn t = dbias_turn<T>(p, blk.b, h, m_block, blk.n_block);
      if (!t.last) {
        if (tid == 0) {
          wait_for(t.sem, kDbiasHasSum - 1, t.turn);
          release_add(t.sem, 1);
        }
        continue;
      }
      int has_sum = 0;
      if (tid == 0) has_sum = (wait_for(t.sem, kDbiasHasSum - 1, t.turn) & kDbiasHasSum) != 0;
      has_sum = __syncthreads_or(has_sum);
      typename T::TiledMmaSdP mma;
      Tensor tScS = mma.get_thread_slice(tid).partition_C(
          make_identity_tensor(cute::Shape<Int<T::kBlockM>, Int<T::kBlockN>>{}));
      Tensor zeros = partition_fragment_C(mma, cute::Shape<Int<T::kBlockM>, Int<T::kBlockN>>{});
      clear(zeros);
      const int m0 = m_block * T::kBlockM;
      dbias_write<T>(p, t.accum, has_sum, zeros, tScS, dbias_out<T>(p, blk.b, h, m0, blk.n0), m0,
                     blk.n0, tid);
    }
  }
}

}  // namespace floe::detail::sm80
