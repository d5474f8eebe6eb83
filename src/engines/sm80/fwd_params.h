// sm80 forward: the device Params. Built once at plan time from the Facts (every stride, scale
// and mask bound resolved); launch() copies it, fills in the pointers and passes it by value
// (__grid_constant__). Plain data, no CUDA types: the planner builds it in ordinary C++.
#pragma once

#include <cstdint>

#include "kernels/band_mask.h"
#include "kernels/fast_divisor.h"

namespace floe::detail::sm80 {

struct FwdParams {
  // Pointers: filled by launch() from the Arguments of one execute.
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* stats = nullptr;               // null: no stats
  const void* bias = nullptr;           // null: no bias
  const float* sink = nullptr;          // null: no sink
  const int32_t* seq_len_q = nullptr;   // null: every batch has s_q queries
  const int32_t* seq_len_kv = nullptr;  // null: every batch has s_kv keys

  // Element strides of the logical dims [b, h, s] (the innermost stride is 1). A broadcast bias
  // dim has stride 0.
  int64_t q_stride_b = 0, q_stride_h = 0, q_stride_s = 0;
  int64_t k_stride_b = 0, k_stride_h = 0, k_stride_s = 0;
  int64_t v_stride_b = 0, v_stride_h = 0, v_stride_s = 0;
  int64_t o_stride_b = 0, o_stride_h = 0, o_stride_s = 0;
  int64_t stats_stride_b = 0, stats_stride_h = 0, stats_stride_s = 0;
  int64_t bias_stride_b = 0, bias_stride_h = 0, bias_stride_s = 0;

  int32_t b = 0;
  int32_t s_q = 0, s_kv = 0, d_qk = 0, d_v = 0;

  // Scores. The plain kernel (no softcap, no bias, scale > 0) keeps raw q.k and folds the scale
  // into the exponent: p = exp2(qk * scale_log2 - max * scale_log2). The score-mod kernel turns
  // q.k into log2 units first: s2 = qk * scale_log2, or with a softcap
  // s2 = cap_log2 * tanh(qk * scale / cap) = cap_log2 - 2 cap_log2 / (exp2(qk * tanh_k) + 1);
  // then s2 += bias * log2(e).
  float scale_log2 = 0.f;  // scale * log2(e)
  bool has_softcap = false;
  float cap_log2 = 0.f;  // softcap * log2(e)
  float tanh_k = 0.f;    // 2 * log2(e) * scale / softcap

  BandMask mask;          // unset bounds: unbounded; the offset uses the batch's actual lengths
  bool has_mask = false;  // any bound set

  bool heavy_last_m = false;  // true: high query tiles see more keys, schedule them first
  // The kernel's divisors, by the query tile count ceil(s_q / block_m), by Hq, and by the group
  // Hq / Hkv (kv head = h / group): CTA index -> query tile, head, batch; query head -> kv head.
  kernels::FastDivisor m_blocks_div, h_q_div, group_div;
};

}  // namespace floe::detail::sm80
