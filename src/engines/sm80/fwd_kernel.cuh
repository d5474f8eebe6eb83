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

template <class T, kernels::ScoreMod kMod>
__global__ void __launch_bounds__(T::kThreads, T::kMinCtas)
    fwd_kernel(const __grid_constant__ FwdParams p) {
  using namespace cute;
  extern __shared__ __align__(128) char smem[];
  const int tid = static_cast<int>(threadIdx.x);

  const kernels::QueryTile tile = kernels::QueryTileScheduler::tile(p.tiles, blockIdx.x);
  const int sq_b = p.lens.q_len(tile.b, p.s_q);
  const int skv_b = p.lens.kv_len(tile.b, p.s_kv);
  const int m0 = tile.m_block * T::kBlockM;
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
  // The plain kernel keeps raw q.k and folds scale * log2(e) into the exponent; the score-mod
  // kernel has already turned its scores into log2 units.
  const float scale_log2 = kMod != kernels::ScoreMod::plain ? 1.f : p.score.scale_log2;

  if (!kt.empty()) {
    FwdMainloop<T, kMod>::run(p, smem, tid, tile, sq_b, skv_b, kt, acc_o, softmax, scale_log2);
  }
  fwd_epilogue<T>(p, smem, tid, tile, sq_b, acc_o, softmax, scale_log2);
}

}  // namespace floe::detail::sm80
