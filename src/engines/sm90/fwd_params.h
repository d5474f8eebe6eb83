// sm90 forward: the device Params. Built once at plan time from the Facts; launch() copies it,
// encodes the TMA descriptors and fills in the pointers, and passes it by value
// (__grid_constant__, so the descriptors are addressable by TMA in the parameter space).
#pragma once

#include <cstdint>

#include "engines/sm90/tma_descriptor.h"
#include "kernels/band_mask.h"
#include "kernels/fast_divisor.h"

namespace floe::detail::sm90 {

struct FwdParams {
  // Q, K, V as TMA tensor maps ([b, h, s, d] with their strides); encoded by launch().
  TmaDescriptor tma_q, tma_k, tma_v;

  void* o = nullptr;
  float* stats = nullptr;               // null: no stats
  const int32_t* seq_len_q = nullptr;   // null: every batch has s_q queries
  const int32_t* seq_len_kv = nullptr;  // null: every batch has s_kv keys

  // Element strides of the logical dims [b, h, s] (the innermost stride is 1).
  int64_t o_stride_b = 0, o_stride_h = 0, o_stride_s = 0;
  int64_t stats_stride_b = 0, stats_stride_h = 0, stats_stride_s = 0;

  int32_t s_q = 0, s_kv = 0;
  // p = exp2(qk * scale_log2 - max * scale_log2): the scale folds into one FFMA per score.
  float scale_log2 = 0.f;
  BandMask mask;          // unset bounds: unbounded; the offset uses the batch's actual lengths
  bool has_mask = false;  // any bound set

  bool heavy_last_m = false;  // true: high query tiles see more keys, schedule them first
  // CTA index -> query tile, head, batch; query head -> kv head (h / group).
  kernels::FastDivisor m_blocks_div, h_q_div, group_div;
};

}  // namespace floe::detail::sm90
