// sm80 backward: the device Params of the four kernels (preprocess, dK/dV main kernel, dQ
// epilogue, dSink). Built once at plan time from the Facts; launch() fills in the pointers and
// the workspace chunks. Plain data, no CUDA types.
#pragma once

#include <cstdint>

#include "common/host_device.h"
#include "kernels/score_params.h"
#include "kernels/seq_lens.cuh"
#include "kernels/sm80/serving_rows.h"
#include "kernels/strides.h"
#include "kernels/tile_scheduler.cuh"

namespace floe::detail::sm80 {

struct BwdParams {
  // Inputs.
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* o = nullptr;
  const void* d_o = nullptr;
  const float* stats = nullptr;
  const void* bias = nullptr;   // null: no bias
  const float* sink = nullptr;  // null: no sink; f32 [h_q], sink_stride apart
  kernels::SeqLens lens;        // seq_len_q / seq_len_kv: pointers filled by launch()
  // Outputs.
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  void* dbias = nullptr;      // dBias per (batch, head), written by the main kernel; else null
  void* dbias_sum = nullptr;  // dBias of a broadcast bias, summed by the main kernel's CTAs in
                              // (batch, head) order (bwd_dbias_sum.cuh); else null
  float* dsink = nullptr;     // null: no sink gradient; f32 [h_q], dsink_stride apart

  // Workspace chunks, rows padded to whole query tiles (s_q_pad = num_m_blocks * block_m), dense
  // or, for a ragged query side, packed (ws_row).
  // "dq_accum": f32, one block_m x dq_ld tile per (b, h_q, query tile), each stored
  // in the main kernel's thread order (bwd_dq_accum.cuh); zeroed by preprocess.
  float* dq_accum = nullptr;
  float* lse_log2 = nullptr;  // "lse_log2": f32 [b, h_q, s_q_pad], LSE * log2(e); +inf: P = 0
  float* delta = nullptr;     // "delta": f32 [b, h_q, s_q_pad], sum_d dO * O
  int32_t* dq_sem = nullptr;  // "dq_semaphore" (deterministic): i32 [b, h_q, num_m_blocks]
  // A broadcast dBias (dbias_sum): "dbias_accum", f32, one block_m x block_n tile per (bias
  // batch, bias head, query tile, key tile) in the main kernel's thread order; "dbias_semaphore",
  // i32 per such tile (the turns taken, and whether the tile holds a partial sum: bit 30),
  // zeroed by preprocess.
  float* dbias_accum = nullptr;
  int32_t* dbias_sem = nullptr;

  // Element strides of the logical dims [b, h, s] (innermost stride 1; stats: [b, h, s]).
  kernels::Strides3 q_strides, k_strides, v_strides, o_strides, do_strides;
  kernels::Strides3 dq_strides, dk_strides, dv_strides, stats_strides;
  kernels::Strides3 bias_strides;  // broadcast dims: 0
  kernels::Strides3 dbias_strides;
  int64_t sink_stride = 0, dsink_stride = 0;

  int32_t b = 0, h_q = 0, h_kv = 0, group = 1;  // kv head = h / group
  int32_t bias_b = 1, bias_h = 1;               // the bias's leading dims (1: broadcast)
  int32_t s_q = 0, s_kv = 0, d_qk = 0, d_v = 0;

  // Scores in log2 units, as in the forward (fwd_params.h): s2 = q.k * scale_log2, or with a
  // softcap s2 = cap_log2 * tanh(q.k * scale / cap); then + bias * log2(e). P = 2^(s2 - lse2).
  float scale = 0.f;  // dQ and dK are scaled by it at the end
  kernels::ScoreParams score;

  int32_t num_m_blocks = 0;  // ceil(s_q / block_m)
  int32_t num_n_blocks = 0;  // ceil(s_kv / block_n)
  // CTA index -> tile, head, batch: the preprocess and the dQ epilogue walk query tiles. (The
  // main kernel divides by num_n_blocks and h_kv: bwd_kernel.cuh says why.)
  kernels::QueryTileScheduler::Params query_tiles;
  int32_t s_q_pad = 0;  // num_m_blocks * block_m
  int32_t dq_ld = 0;    // row length of dq_accum: the compiled d_qk tile
  bool deterministic = false;
  // A dBias summed over the heads of a GQA group (bwd_dbias_sum.cuh): each CTA visits in (query
  // tile, head) order, so that a kv head's CTA waits one query tile, not a whole group of heads,
  // for the previous kv head's turns.
  bool heads_inner = false;

  // Ragged sides (DESIGN 2.1), read only by the serving instantiations (kServing); last, so that
  // the dense kernels' parameter offsets stay as they were.
  kernels::ServingRows serve;
  // A ragged query side packs the per-row workspace chunks (dq_accum, lse_log2, delta) by head:
  // batch b's query tiles start at tile q0 / block_m + b of its head's ws_tiles = total_q /
  // block_m + b tiles (q0: its slot's first token), so that they are sized by the packed total,
  // not by b times the envelope, and no two slots' tiles meet (ws_row below).
  bool ws_packed = false;
  int64_t ws_tiles = 0;

  // The first workspace row of the query tile at row m0 (a multiple of kBlockM) of batch b, head
  // h; q0 is the batch's first query token (ragged; 0 when dense).
  template <int kBlockM, bool kServing>
  FLOE_HD int64_t ws_row(int b, int h, int64_t q0, int m0) const {
    if constexpr (kServing) {
      if (ws_packed) return (h * ws_tiles + q0 / kBlockM + b) * kBlockM + m0;
    }
    return (static_cast<int64_t>(b) * h_q + h) * s_q_pad + m0;
  }

  // The bias is read with 16-byte loads (its tile staged in shared memory): its strides allow
  // it (plan time) and its pointer is 16-byte aligned (set per launch).
  bool bias_vec = false;
  // dBias (per batch and head, written by the main kernel) is written with 16-byte stores: the
  // same rules for dbias.
  bool dbias_vec = false;
};

// What one main-kernel CTA owns: a key tile of one kv head of one batch, with the batch's actual
// lengths; for a ragged side, where the batch's rows start (q0, kv0) and the key rows of its slot
// that the key tiles cover (kv_rows; s_kv when dense) and the slot's width (kv_slot).
struct BwdBlock {
  int b, h_kv, n_block, n0;
  int sq_b, skv_b;
  int64_t q0, kv0;
  int kv_rows, kv_slot;
};

}  // namespace floe::detail::sm80
