// The decode engine's kernel arguments: everything plan() decided (P1), plus the device pointers
// launch() fills in. Plain data shared by the host (.cc) and device (.cu) code.
#pragma once

#include <cstdint>

#include "kernels/band_mask.h"
#include "kernels/ragged_rows.h"

namespace floe::detail::decode {

inline constexpr int kThreads = 128;    // four warps; each takes 16 keys of a 64-key tile
inline constexpr int kBlockN = 64;      // keys per pipeline stage
inline constexpr int kBlockM = 16;      // packed (query, head-in-group) rows per CTA: one MMA's M
inline constexpr int kCombineRows = 4;  // combine: rows per 128-thread block, one warp a row

struct Params {
  // Q, O: [B, Hq, Sq, D] strides (a ragged side: batch stride 0, token stride as the row stride).
  const void* q = nullptr;
  void* o = nullptr;
  float* stats = nullptr;
  int64_t q_s[4] = {0, 0, 0, 0}, o_s[4] = {0, 0, 0, 0}, stats_s[3] = {0, 0, 0};
  // K, V. Dense or ragged: [B, Hkv, S, D] strides as above (d stride 1). Paged: [page, row,
  // head, d] strides.
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t k_s[4] = {0, 0, 0, 0}, v_s[4] = {0, 0, 0, 0};
  const float* sink = nullptr;
  int64_t sink_s = 0;
  const int32_t* seq_len_q = nullptr;
  const int32_t* seq_len_kv = nullptr;
  int64_t seq_len_q_s = 0, seq_len_kv_s = 0;
  bool ragged_q = false, ragged_kv = false, paged_kv = false;
  kernels::RaggedSide rq, rkv;
  kernels::PagedSide pages;
  int page_shift = 0;  // log2(page_size): pages are powers of two

  int b = 0, h_q = 0, h_kv = 0, s_q = 0, s_kv = 0, d_qk = 0, d_v = 0, group = 1;
  int m_tiles = 1;  // ceil(s_q * group / 16): CTAs per (batch, kv head, split)

  float scale = 1, scale_log2 = 1;
  bool has_softcap = false;
  float softcap = 0, inv_softcap = 0;
  bool has_stats = false, has_sink = false;
  kernels::BandMask band;

  // Split-KV. A batch whose keys take one split is written directly by its CTA; the others go
  // through the partials and the combine.
  //
  // Dynamic (split_tokens == 0): the splits follow the device lengths. The grid has slots - b
  // = b * max_splits CTAs per (kv head, row tile) (max_splits: the envelope's rule). Every CTA
  // computes the total T of key tiles over the batch (laid end to end in batch order) and the
  // quota Q = max(min_split_tiles, ceil(T / CTAs)); CTA c takes the pieces of tiles [cQ, cQ +
  // Q): at most Q tiles a CTA for every length vector within the envelope. Piece (batch, c)
  // writes partial row batch + c < b + CTAs = slots (distinct: along the tiles, batch and c
  // never both stay). A batch whose tiles lie in one chunk is written directly.
  //
  // Batch-invariant (split_tokens > 0): splits at multiples of split_tokens keys, grid b *
  // max_splits per (kv head, row tile), partial rows indexed by split * b + batch; max_splits
  // == 1: no partials.
  int max_splits = 1;
  int slots = 0;                 // dynamic: partial rows, b * (max_splits + 1)
  int min_split_tiles = 1;       // dynamic splits: at least this many 64-key tiles a split
  int64_t split_tokens = 0;      // > 0: batch-invariant, splits at multiples of this many keys
  float* partial_o = nullptr;    // [row, h_q, s_q, d_v] f32 (row: see above)
  float* partial_lse = nullptr;  // [row, h_q, s_q] f32, natural log
  // Dynamic: per batch {first CTA, last CTA} of its pieces, written by CTA 0 of the attention
  // kernel, read by the combine.
  int32_t* schedule = nullptr;
  // d128's pipeline depth: 3 (2 CTAs an SM), or 2 (3 CTAs an SM) for grids of many waves.
  int stages = 0;
};

}  // namespace floe::detail::decode
