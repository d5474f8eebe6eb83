// sm90 forward: the device Params. Built once at plan time from the Facts; launch() copies it,
// encodes the TMA descriptors and fills in the pointers, and passes it by value
// (__grid_constant__, so the descriptors are addressable by TMA in the parameter space).
#pragma once

#include <cstdint>

#include "engines/sm90/tma_descriptor.h"
#include "kernels/band_mask.h"
#include "kernels/fast_divisor.h"
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
  // p = exp2(qk * scale_log2 - max * scale_log2): the scale folds into one FFMA per score.
  float scale_log2 = 0.f;
  kernels::BandMask mask;  // unset bounds: unbounded; the offset uses the batch's actual lengths
  bool has_mask = false;   // any bound set

  // CTA index -> query tile, head, batch (heavy tiles first for right-bounded bands); query
  // head -> kv head (h / group).
  kernels::QueryTileScheduler::Params tiles;
  kernels::FastDivisor group_div;
};

}  // namespace floe::detail::sm90
