// sm90 forward: the device Params. Built once at plan time from the Facts; launch() copies it,
// encodes the TMA descriptors and fills in the pointers, and passes it by value
// (__grid_constant__, so the descriptors are addressable by TMA in the parameter space).
#pragma once

#include <cstdint>

#include "common/host_device.h"
#include "engines/sm90/tma_descriptor.h"
#include "kernels/fast_divisor.h"
#include "kernels/score_params.h"
#include "kernels/seq_lens.cuh"
#include "kernels/sm80/serving_rows.h"
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
  // Scale, softcap and band. The plain kernel folds the scale into the exponent, p = exp2(qk *
  // scale_log2 - max * scale_log2), one FFMA per score; the score-mod kernel turns q.k into log2
  // units first (kernels/score_mod.cuh).
  kernels::ScoreParams score;

  // A CTA's tiles (query tile, head, batch): from blockIdx.x in steps of gridDim.x (one per CTA,
  // or persistent); query head -> kv head (h / group).
  kernels::PersistentTileScheduler::Params tiles;
  kernels::FastDivisor group_div;

  // The score-mod kernel's: appended, so that the plain kernel reads its fields at the offsets it
  // read before they existed. The bias as a [b, h, s_q, s_kv] tensor map, loaded in boxes of 64
  // keys x the tile's query rows (encoded by launch(); has_bias false: no bias). A dim the bias
  // broadcasts (size 1, or stride 0) has size 1 in the map and takes coordinate 0: its
  // coordinate is the tile's batch (head) times bias_b_step (bias_h_step), 0 or 1.
  TmaDescriptor tma_bias;
  bool has_bias = false;
  int32_t bias_b_step = 0, bias_h_step = 0;
  const float* sink = nullptr;  // null: no sink; f32 [h_q], sink_stride apart
  int64_t sink_stride = 0;
  // The list's head and batch indices swapped (tiles made with Hq and B exchanged): a tile's
  // batches run side by side, so that a bias broadcast over the batch is read once from HBM and
  // then from L2.
  bool batches_inner = false;
  // The score-mod kernel's unit of the bias (kernels::add_bias_tile): log2(e) with a softcap, whose
  // scores are in log2 units; else 1 / scale, the scores staying raw q.k with the scale folded into
  // the exponent as in the plain kernel.
  float bias_unit = 0.f;
  // The score-mod kernel's softcap (kernels/sm90/softcap_split.cuh): its scores are
  // h' = s2 - cap_log2 = -2 cap_log2 / (exp2(q.k tanh_k) + 1), in [-2 cap_log2, 0], from
  // softcap_neg_a = -1 / (2 cap_log2); the softmax's LSE is then less lse_shift = cap (natural
  // units; 0 without a softcap), which the epilogue gives back (and takes from the sink).
  // fixed_max_rows: the softmax takes fixed_max (h' units) as every row's max instead of a
  // running one, the scores being bounded above by the cap (fwd_plan.cc says where it may).
  float softcap_neg_a = 0.f;
  float lse_shift = 0.f;
  float fixed_max = 0.f;
  bool fixed_max_rows = false;

  // The serving kernel's (ragged sides, DESIGN 2.1), appended likewise: where each batch's rows
  // sit in the packed tensors (offsets and valid lengths filled per launch; the batch strides of O
  // and stats are 0 there and their row strides the token strides). The shared reading of slots
  // (kernels/ragged_rows.h, kernels/sm80/serving_rows.h's batch_rows), as sm80's serving kernels.
  kernels::ServingRows serve;
  // A paged K/V cache (DESIGN 2.2; serve.paged_kv, the block table in serve.table): the rows of
  // one box of the K and V maps, min(P, block_n) (fwd_mainloop.cuh's load_paged).
  int32_t paged_box_rows = 0;
  // 1: a key tile's pages read from the block table together before its first box, and shared by
  // K's and V's boxes (PagedBoxes, fwd_mainloop.cuh); the plan sets it where pages are smaller than
  // the tile and it has at most kPagedBatchMaxBoxes boxes (fwd_plan.cc).
  int32_t paged_batched = 0;
};

// The most boxes a key tile may have for its pages to be read together (PagedBoxes' registers).
inline constexpr int kPagedBatchMaxBoxes = 8;

// What the softmax multiplies the scores by to reach log2 units: scale * log2(e) for raw q.k (the
// plain kernel, and the score-mod kernel without a softcap), 1 after a softcap.
template <bool kScoreMod>
FLOE_HD float score_unit(const FwdParams& p) {
  if constexpr (kScoreMod) {
    if (p.score.has_softcap) return 1.f;
  }
  return p.score.scale_log2;
}

}  // namespace floe::detail::sm90
