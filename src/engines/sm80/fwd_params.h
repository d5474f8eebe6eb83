// sm80 forward: the device Params. Built once at plan time from the Facts (every stride, scale
// and mask bound resolved); launch() copies it, fills in the pointers and passes it by value
// (__grid_constant__). Plain data, no CUDA types: the planner builds it in ordinary C++.
#pragma once

#include <cstdint>

#include "kernels/fast_divisor.h"
#include "kernels/score_params.h"
#include "kernels/seq_lens.cuh"
#include "kernels/sm80/serving_rows.h"
#include "kernels/strides.h"
#include "kernels/tile_scheduler.cuh"

namespace floe::detail::sm80 {

struct FwdParams {
  // Pointers: filled by launch() from the Arguments of one execute.
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* stats = nullptr;       // null: no stats
  const void* bias = nullptr;   // null: no bias
  const float* sink = nullptr;  // null: no sink; f32 [h_q], sink_stride apart
  kernels::SeqLens lens;        // seq_len_q / seq_len_kv: pointers filled by launch()

  // Element strides of the logical dims [b, h, s] (the innermost stride is 1). A broadcast bias
  // dim has stride 0.
  kernels::Strides3 q_strides, k_strides, v_strides, o_strides, stats_strides, bias_strides;
  int64_t sink_stride = 0;

  int32_t b = 0;
  int32_t s_q = 0, s_kv = 0, d_qk = 0, d_v = 0;

  kernels::ScoreParams score;  // scale, softcap and band (kernels/score_params.h)

  // CTA index -> query tile, head, batch (the scheduler's divisors by the query tile count and Hq).
  kernels::QueryTileScheduler::Params tiles;
  // Query head -> kv head: h / group, the group Hq / Hkv.
  kernels::FastDivisor group_div;

  // Ragged sides and paged K/V (DESIGN 2.1, 2.2), read only by the serving instantiations
  // (kServing); last, so that the dense kernels' parameter offsets stay as they were.
  kernels::ServingRows serve;
  // The serving kernels' order: with a band bounded on the right only (causal), longest first
  // over every head and batch (query tile slowest, highest first), so that the long sequences'
  // heavy tiles start in the first wave whatever batch they are in; else QueryTileScheduler's.
  kernels::PersistentTileScheduler::Params serve_tiles;

  // The bias is read with 16-byte loads (its tile staged in shared memory): its strides allow
  // it (plan time) and its pointer is 16-byte aligned (set per launch).
  bool bias_vec = false;
};

}  // namespace floe::detail::sm80
