// sm80 backward: the device Params of the four kernels (preprocess, dK/dV main kernel, dQ
// epilogue, dSink). Built once at plan time from the Facts; launch() fills in the pointers and
// the workspace chunks. Plain data, no CUDA types.
#pragma once

#include <cstdint>

#include "kernels/band_mask.h"

namespace floe::detail::sm80 {

struct BwdParams {
  // Inputs.
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* o = nullptr;
  const void* d_o = nullptr;
  const float* stats = nullptr;
  const void* bias = nullptr;           // null: no bias
  const float* sink = nullptr;          // null: no sink
  const int32_t* seq_len_q = nullptr;   // null: every batch has s_q queries
  const int32_t* seq_len_kv = nullptr;  // null: every batch has s_kv keys
  // Outputs.
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  void* dbias = nullptr;      // dBias per (batch, head), written by the main kernel; else null
  void* dbias_sum = nullptr;  // dBias of a broadcast bias, summed by bwd_dbias.cuh; else null
  float* dsink = nullptr;     // null: no sink gradient

  // Workspace chunks, dense, rows padded to whole query tiles (s_q_pad = num_m_blocks * block_m).
  // "dq_accum": f32, one block_m x dq_ld tile per (b, h_q, query tile), each stored
  // in the main kernel's thread order (bwd_dq_accum.cuh); zeroed by preprocess.
  float* dq_accum = nullptr;
  float* lse_log2 = nullptr;  // "lse_log2": f32 [b, h_q, s_q_pad], LSE * log2(e); +inf: P = 0
  float* delta = nullptr;     // "delta": f32 [b, h_q, s_q_pad], sum_d dO * O
  int32_t* dq_sem = nullptr;  // "dq_semaphore" (deterministic): i32 [b, h_q, num_m_blocks]

  // Element strides of the logical dims [b, h, s] (innermost stride 1; stats: [b, h, s]).
  int64_t q_stride_b = 0, q_stride_h = 0, q_stride_s = 0;
  int64_t k_stride_b = 0, k_stride_h = 0, k_stride_s = 0;
  int64_t v_stride_b = 0, v_stride_h = 0, v_stride_s = 0;
  int64_t o_stride_b = 0, o_stride_h = 0, o_stride_s = 0;
  int64_t do_stride_b = 0, do_stride_h = 0, do_stride_s = 0;
  int64_t dq_stride_b = 0, dq_stride_h = 0, dq_stride_s = 0;
  int64_t dk_stride_b = 0, dk_stride_h = 0, dk_stride_s = 0;
  int64_t dv_stride_b = 0, dv_stride_h = 0, dv_stride_s = 0;
  int64_t stats_stride_b = 0, stats_stride_h = 0, stats_stride_s = 0;
  int64_t bias_stride_b = 0, bias_stride_h = 0, bias_stride_s = 0;  // broadcast dims: 0
  int64_t dbias_stride_b = 0, dbias_stride_h = 0, dbias_stride_s = 0;

  int32_t b = 0, h_q = 0, h_kv = 0, group = 1;  // kv head = h / group
  int32_t bias_b = 1, bias_h = 1;               // the bias's leading dims (1: broadcast)
  int32_t s_q = 0, s_kv = 0, d_qk = 0, d_v = 0;

  // Scores in log2 units, as in the forward (fwd_params.h): s2 = q.k * scale_log2, or with a
  // softcap s2 = cap_log2 * tanh(q.k * scale / cap); then + bias * log2(e). P = 2^(s2 - lse2).
  float scale = 0.f;       // dQ and dK are scaled by it at the end
  float scale_log2 = 0.f;  // scale * log2(e)
  bool has_softcap = false;
  float cap_log2 = 0.f;  // softcap * log2(e)
  float tanh_k = 0.f;    // 2 * log2(e) * scale / softcap

  BandMask mask;
  bool has_mask = false;

  int32_t num_m_blocks = 0;  // ceil(s_q / block_m)
  int32_t num_n_blocks = 0;  // ceil(s_kv / block_n)
  int32_t s_q_pad = 0;       // num_m_blocks * block_m
  int32_t dq_ld = 0;         // row length of dq_accum: the compiled d_qk tile
  bool deterministic = false;
};

// What one main-kernel CTA owns: a key tile of one kv head of one batch, with the batch's actual
// lengths.
struct BwdBlock {
  int b, h_kv, n_block, n0;
  int sq_b, skv_b;
};

}  // namespace floe::detail::sm80
