// sm80 backward, the main kernel: one CTA per (key tile, kv head, batch), key tile fastest (the
// CTAs in flight share one head's Q and dO in L2). It keeps its K and V tiles in shared memory
// and its dK and dV tiles in registers, and visits every (query head of its group, query tile)
// that sees one of its keys; per visit (bwd_mainloop.cuh):
//   S = Q K^T, dP = dO V^T; P = 2^(s2 - lse2); dS = P (dP - delta) [* (1 - tanh^2)];
//   dV += P^T dO; dK += dS^T Q; dQ accumulator += dS K (fp32 atomics in global memory).
// dK and dV are accumulated at the kv head count (GQA by indexing, no expansion) and written
// once at the end, scaled, through their strides (bwd_epilogue.cuh).
//
// A bias broadcast over the batch or the heads: its gradient is summed across these CTAs in a
// fixed order (bwd_dbias_sum.cuh).
//
// Deterministic mode: the dQ additions into one query tile happen in ascending key-tile order.
// Each visit waits on the tile's semaphore until every lower key tile that visits it has added
// its share. A CTA only ever waits on CTAs of lower linear index (the same head, lower key
// tiles), which the hardware has already dispatched, so the wait always ends.
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm80/bwd_dbias_sum.cuh"
#include "engines/sm80/bwd_epilogue.cuh"
#include "engines/sm80/bwd_mainloop.cuh"
#include "engines/sm80/bwd_params.h"
#include "engines/sm80/bwd_traits.cuh"
#include "kernels/band_tiles.cuh"
#include "kernels/sm80/copy.cuh"

namespace floe::detail::sm80 {

// kServing: the serving instantiation (ragged sides: kernels/sm80/serving_rows.h).
template <class T, kernels::ScoreMod kMod, bool kServing>
__global__ void __launch_bounds__(T::kThreads, 1) bwd_kernel(const __grid_constant__ BwdParams p) {
  using namespace cute;
  using Element = typename T::Element;
  extern __shared__ __align__(128) char smem[];
  const int tid = static_cast<int>(threadIdx.x);

  // Runtime division, not a scheduler's FastDivisor: decoded that way (KeyTileScheduler, now
  // gone) the d128 plain loop spilled a register and reloaded it every visit (ptxas, sm_90a);
  // once per CTA, the division costs less than that.
  const int n_block = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.num_n_blocks));
  const int hb = static_cast<int>(blockIdx.x / static_cast<unsigned>(p.num_n_blocks));
  const int h_kv = hb % p.h_kv;
  const int b = hb / p.h_kv;
  const kernels::BatchRows rows =
      kServing ? kernels::batch_rows(p.serve, p.lens, b, p.s_q, p.s_kv)
               : kernels::BatchRows{
                     0,     0,     p.lens.q_len(b, p.s_q), p.lens.kv_len(b, p.s_kv), p.s_q, p.s_kv,
                     p.s_q, p.s_kv};
  const int sq_b = rows.sq;
  const int skv_b = rows.skv;
  const int n0 = n_block * T::kBlockN;
  // A ragged key slot shorter than the envelope: its tiles past the slot write no dK or dV (the
  // next slot's tokens); with a bias gradient they still zero their dBias columns, or take their
  // turns on a broadcast dBias, below.
  if (kServing && n0 >= rows.kv_rows && p.dbias == nullptr && p.dbias_sum == nullptr) return;
  kernels::QueryTiles qt;
  if (n0 < skv_b) {
    qt = kernels::query_tiles(p.score.mask, p.score.has_mask, n0, min(n0 + T::kBlockN, skv_b) - 1,
                              sq_b, skv_b, T::kBlockM);
  }

  typename T::TiledMmadKV mma_dkv;
  Tensor acc_dk = partition_fragment_C(mma_dkv, cute::Shape<Int<T::kBlockN>, Int<T::kDqk>>{});
  Tensor acc_dv = partition_fragment_C(mma_dkv, cute::Shape<Int<T::kBlockN>, Int<T::kDv>>{});
  clear(acc_dk);
  clear(acc_dv);

  const BwdBlock blk{b,     h_kv,    n_block,  n0,           sq_b,
                     skv_b, rows.q0, rows.kv0, rows.kv_rows, rows.kv_slot};
  if (!qt.empty()) BwdMainloop<T, kMod, kServing>::run(p, smem, tid, blk, qt, acc_dk, acc_dv);
  if (p.dbias != nullptr) bwd_zero_unvisited_dbias<T>(p, tid, blk, qt);
  if constexpr (kernels::has_bias_code(kMod)) {
    if (p.dbias_sum != nullptr) dbias_pass_unvisited<T>(p, tid, blk, qt);
  }
  if constexpr (kServing) {
    // The slot read again, through an index the compiler cannot see through, rather than kept
    // in registers across the main loop.
    const kernels::BatchRows again =
        kernels::batch_rows(p.serve, p.lens, kernels::opaque(b), p.s_q, p.s_kv);
    BwdBlock end = blk;
    end.kv0 = again.kv0;
    end.kv_rows = again.kv_rows;
    end.kv_slot = again.kv_slot;
    bwd_epilogue<T, kServing>(p, smem, tid, end, acc_dk, acc_dv);
  } else {
    bwd_epilogue<T, kServing>(p, smem, tid, blk, acc_dk, acc_dv);
  }
}

}  // namespace floe::detail::sm80
