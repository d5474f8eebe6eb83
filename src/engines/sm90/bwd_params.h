// sm90 backward: the device Params of its three kernels (preprocess, dK/dV main kernel, dQ
// convert). Built once at plan time; launch() encodes the TMA descriptors and fills in the
// pointers and the workspace chunks. Plain data, no CUDA types.
#pragma once

#include <cstdint>

#include "engines/sm90/tma_descriptor.h"
#include "kernels/score_params.h"
#include "kernels/seq_lens.cuh"
#include "kernels/strides.h"
#include "kernels/tile_scheduler.cuh"

namespace floe::detail::sm90 {

struct BwdParams {
  // Q, dO (query tiles) and K, V (key tiles) as TMA tensor maps; encoded by launch().
  TmaDescriptor tma_q, tma_k, tma_v, tma_do;

  const void* o = nullptr;
  const void* d_o = nullptr;
  const float* stats = nullptr;  // natural-log LSE, [b, h_q, s_q] through its strides
  kernels::SeqLens lens;         // the batches' actual lengths, through their strides
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;

  // Workspace chunks, dense, rows padded to whole query tiles (s_q_pad = num_m_blocks * block_m):
  // "dq_accum" f32 [b, h_q, s_q_pad, d], each query tile's 64 x d floats in the main kernel's
  // fragment order (bwd_traits.cuh), zeroed by preprocess, added to by bulk reduce-adds;
  // "lse_log2" f32 [b, h_q, s_q_pad], LSE * log2(e), +inf where P must be 0 (padding rows,
  // rows that saw no key); "delta" f32 [b, h_q, s_q_pad], sum_d dO * O. The main kernel reads a
  // tile's LSE and Delta with one bulk copy each, so their rows are dense and 16-byte aligned.
  float* dq_accum = nullptr;
  float* lse_log2 = nullptr;
  float* delta = nullptr;
  // Deterministic mode only (nullptr otherwise): "dq_semaphore" i32 [b, h_q, num_m_blocks], per
  // query tile the count of key tiles that have added their dQ share, zeroed by preprocess.
  int32_t* dq_sem = nullptr;

  // Element strides of the logical dims [b, h, s] (the innermost stride is 1).
  kernels::Strides3 o_strides, do_strides, dq_strides, dk_strides, dv_strides, stats_strides;

  int32_t b = 0, h_q = 0, h_kv = 0, group = 1;  // kv head = h / group
  int32_t s_q = 0, s_kv = 0;
  int32_t d = 0, d_v = 0;  // d_qk (dq_accum's row length) and d_v (O, dO: Delta)

  float scale = 0.f;  // dQ and dK are scaled by it at the end
  // Scale, softcap and band. The plain kernel: P = 2^(q.k * score.scale_log2 - lse2), as the
  // forward's plain kernel; the softcap kernel recomputes s2 = cap_log2 * tanh(q.k * scale / cap)
  // first (kernels/score_params.h, score_mod.cuh).
  kernels::ScoreParams score;

  int32_t num_m_blocks = 0;  // ceil(s_q / block_m)
  int32_t num_n_blocks = 0;  // ceil(s_kv / block_n)
  int32_t s_q_pad = 0;       // num_m_blocks * block_m

  // Deterministic mode: the key tiles of one query tile add its dQ one after the other, highest
  // key tile first (bwd_kernel.cuh), and the main kernel's grid hands out the key tiles of a
  // (kv head, batch) highest first, so that a CTA only waits on CTAs dispatched before it.
  bool deterministic = false;

  // blockIdx -> tile: (query tile, h_q, b) for preprocess and dQ convert, (key tile, h_kv, b) for
  // the main kernel.
  kernels::QueryTileScheduler::Params query_tiles;
  kernels::KeyTileScheduler::Params key_tiles;

  // The dSink step (the _dsink variants, bwd_dsink.cuh): the sink f32 [h_q] and its gradient,
  // sink_stride and dsink_stride apart. The other kernels never read them (the sink's weight is
  // in the LSE). Last, so that the other kernels' parameter offsets stay those of before.
  const float* sink = nullptr;
  float* dsink = nullptr;
  int64_t sink_stride = 0, dsink_stride = 0;

  // The bias kernel (bwd_bias.cuh): the bias as a [b, h, s_q, s_kv] tensor map in boxes of 64
  // keys x block_m queries, a broadcast dim's coordinate 0 (the tile's batch and head times
  // bias_b_step and bias_h_step, 0 or 1), and its unit: 1 / scale, added to q.k before the scale
  // as the forward's score-mod kernel does. With has_dbias, dBias (one writer a tile: not summed
  // over a broadcast dim) as a tensor map of the same boxes, which dS's tile is stored to.
  TmaDescriptor tma_bias, tma_dbias;
  float bias_unit = 0.f;
  int32_t bias_b_step = 0, bias_h_step = 0, dbias_b_step = 0, dbias_h_step = 0;
  bool has_dbias = false;
  // A dBias summed over a broadcast dim: "dbias_accum" f32 [dbias_b, dbias_h, num_m_blocks,
  // num_n_blocks, block_m x block_n], each tile in the consumers' S^T fragment order, zeroed by
  // the preprocess, added to by the main kernel's vector reductions (in no fixed order, or in
  // deterministic mode in the sum's order: bwd_dbias_order.cuh), turned into dBias (dbias,
  // through dbias_strides) by the last step. nullptr otherwise; has_dbias is then false.
  float* dbias_accum = nullptr;
  void* dbias = nullptr;
  kernels::Strides3 dbias_strides;
  int32_t dbias_b = 0, dbias_h = 0;  // the summed dBias's batch and head dims
  int32_t dbias_tile_floats = 0;     // block_m x block_n
  // Deterministic mode with a summed dBias (nullptr otherwise): "dbias_semaphore" i32 [dbias_b,
  // dbias_h, num_m_blocks, num_n_blocks], per accumulator tile the count of the sum's pairs that
  // have taken their turn, zeroed by the preprocess.
  int32_t* dbias_sem = nullptr;
};

}  // namespace floe::detail::sm90
