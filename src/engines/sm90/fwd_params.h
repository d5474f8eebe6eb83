// sm90 forward: the device Params. Built once at plan time from the Facts; launch() copies it,
// encodes the TMA descriptors and fills in the pointers, and passes it by value
// (__grid_constant__, so the descriptors are addressable by TMA in the parameter space).
#pragma once

#include <cstdint>

#include "engines/sm90/tma_descriptor.h"
#include "kernels/fast_divisor.h"
#include "kernels/score_params.h"
#include "kernels/seq_lens.cuh"
#include "kernels/strides.h"
#include "kernels/tile_scheduler.cuh"

namespace floe::detail::sm90 {

struct FwdParams {
  // Q, K, V as TMA tensor maps ([b, h, s, d] with their strides); encoded by launch().
  TmaDescriptor tma_q, tma_k, tma_v;

  void* o = nullptr;
  float* stats = nullptr;  // null: no stats
  kernels::SeqLens lens;   // the batches' actual lengths, through their strides

  // Element strides of the logical dims [b, h, s] (the innermost stride is 1).
  kernels::Strides3 o_strides, stats_strides;

  int32_t s_q = 0, s_kv = 0;
  // Scale and band (no softcap yet: the planner declines it). p = exp2(qk * scale_log2 - max *
  // scale_log2): the scale folds into one FFMA per score.
  kernels::ScoreParams score;

  // A CTA's tiles (query tile, head, batch): from blockIdx.x in steps of gridDim.x (one per CTA,
  // or persistent); query head -> kv head (h / group).
  kernels::PersistentTileScheduler::Params tiles;
  kernels::FastDivisor group_div;
};

}  // namespace floe::detail::sm90
