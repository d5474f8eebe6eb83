// sm80 forward: the kernel. One CTA per (query tile, head, batch), scheduled by
// kernels/tile_scheduler.cuh; reads the batch's actual lengths on the device (P6), finds the
// key tiles its rows can see (kernels/band_tiles.cuh), runs the main loop (fwd_mainloop.cuh)
// and the epilogue (fwd_epilogue.cuh). A CTA whose rows are all past the batch's query length,
// or that sees no key, runs no main loop and writes O = 0 and its stats.
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm80/fwd_epilogue.cuh"
#include "engines/sm80/fwd_mainloop.cuh"
#include "engines/sm80/fwd_params.h"
#include "engines/sm80/fwd_traits.cuh"
#include "kernels/band_tiles.cuh"
#include "kernels/online_softmax.cuh"
#include "kernels/tile_scheduler.cuh"

namespace floe::detail::sm80 {

// kServing: the serving instantiation (ragged sides, paged K/V: kernels/sm80/serving_rows.h); the
// dense one reads the lengths alone and compiles none of it.
template <class T, kernels::ScoreMod kMod, bool kServing>
__global__ void __launch_bounds__(T::kThreads, T::kMinCtas)
    fwd_kernel(const __grid_constant__ FwdParams p) {
  using namespace cute;
  extern __shared__ __align__(128) char smem[];
  const int tid = static_cast<int>(threadIdx.x);

  const kernels::QueryTile tile =
      kServing ? kernels::PersistentTileScheduler::tile(p.serve_tiles, blockIdx.x)
               : kernels::QueryTileScheduler::tile(p.tiles, blockIdx.x);
  const kernels::BatchRows rows = kServing
                                      ? kernels::batch_rows(p.serve, p.lens, tile.b, p.s_q, p.s_kv)
                                      : kernels::BatchRows{0,
                                                           0,
                                                           p.lens.q_len(tile.b, p.s_q),
                                                           p.lens.kv_len(tile.b, p.s_kv),
                                                           p.s_q,
                                                           p.s_kv,
                                                           p.s_q,
                                                           p.s_kv};
  const int sq_b = rows.sq;
  const int skv_b = rows.skv;
  const int m0 = tile.m_block * T::kBlockM;
  // A ragged slot shorter than the envelope: its tiles past the slot write nothing (the tokens
  // there belong to the next slot).
  if (kServing && m0 >= rows.q_rows) return;
  kernels::KeyTiles kt;
  if (m0 < sq_b) {
    kt = kernels::key_tiles(p.score.mask, p.score.has_mask, m0, min(m0 + T::kBlockM, sq_b) - 1,
                            sq_b, skv_b, T::kBlockN);
  }

  typename T::TiledMma mma;
  Tensor acc_o =
      partition_fragment_C(mma, cute::Shape<Int<T::kBlockM>, Int<T::kDv>>{});  // (4, MMA_M, MMA_N)
  clear(acc_o);
  constexpr int kRows = decltype(size<0>(kernels::acc_row_col_layout(acc_o.layout())))::value;
  kernels::OnlineSoftmax<kRows> softmax;
  softmax.init();
  // The plain kernel keeps raw q.k and folds scale * log2(e) into the exponent; the softcap
  // kind keeps h = (tanh - 1) / 2 and folds 2 cap_log2 into it (its logits less cap_log2, which
  // the epilogue gives back: fwd_mainloop.cuh, softcap_half_tanh); the other score-mod kinds have
  // already turned their scores into log2 units.
  constexpr bool kHalfTanh = kMod == kernels::ScoreMod::softcap;
  const float scale_log2 = kMod == kernels::ScoreMod::plain ? p.score.scale_log2
                           : kHalfTanh                      ? 2.f * p.score.cap_log2
                                                            : 1.f;

  if (!kt.empty()) {
    FwdMainloop<T, kMod, kServing>::run(p, smem, tid, tile, sq_b, skv_b, kt, acc_o, softmax,
                                        scale_log2, rows);
  }
  if constexpr (kServing) {
    // The slot read again, through an index the compiler cannot see through, rather than kept
    // in registers across the main loop (where the accumulators need them).
    const kernels::BatchRows again =
        kernels::batch_rows(p.serve, p.lens, kernels::opaque(tile.b), p.s_q, p.s_kv);
    fwd_epilogue<T, kServing, kHalfTanh>(p, smem, tid, tile, sq_b, acc_o, softmax, scale_log2,
                                         again);
  } else {
    fwd_epilogue<T, kServing, kHalfTanh>(p, smem, tid, tile, sq_b, acc_o, softmax, scale_log2,
                                         rows);
  }
}

}  // namespace floe::detail::sm80
