// The decode engine's kernel arguments: everything plan() decided (P1), plus the device pointers
// launch() fills in. Plain data shared by the host (.cc) and device (.cu) code.
#pragma once

#include <cstdint>

#include "kernels/band_mask.h"
#include "kernels/ragged_rows.h"
#include "kernels/seq_lens.cuh"
#include "kernels/strides.h"

namespace floe::detail::decode {

inline constexpr int kThreads = 128;  // four warps; each takes 16 keys of a 64-key tile
inline constexpr int kBlockN = 64;    // keys per pipeline stage
inline constexpr int kBlockM = 16;    // packed (query, head-in-group) rows per CTA: one MMA's M

struct Params {
  // Q, O, stats: [b, h, s] strides (a ragged side: b = 0, s the token stride), and Q's and O's
  // d strides (any: Q and O move element by element).
  const void* q = nullptr;
  void* o = nullptr;
  float* stats = nullptr;
  kernels::Strides3 q_strides, o_strides, stats_strides;
  int64_t q_d_stride = 1, o_d_stride = 1;
  // K, V (d stride 1). Dense or ragged: [b, h, s] as above. Paged: b is the page stride, h the
  // head's, s the row's within a page.
  const void* k = nullptr;
  const void* v = nullptr;
  kernels::Strides3 k_strides, v_strides;
  const float* sink = nullptr;
  int64_t sink_stride = 0;
  kernels::SeqLens lens;  // seq_len_q / seq_len_kv, i32 [b]: pointers filled by launch()
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

  // Split-KV. A batch whose keys take one split is written directly by its CTA; the others
  // write partials, and the last of their CTAs to finish (an arrival counter per unit) merges
  // them in split order into O and stats.
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
  // Per unit (batch, kv head, row tile): how many of its split pieces have written their
  // partials. Zeroed by the execute (a memset before the kernel); the piece that brings it to
  // the batch's split count merges them.
  int32_t* arrivals = nullptr;
  // d128's pipeline depth: 3 (2 CTAs an SM), or 2 (3 CTAs an SM) for grids of many waves.
  int stages = 0;
};

}  // namespace floe::detail::decode
