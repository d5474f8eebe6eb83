// decode: split-KV forward attention for short query sides (s_q <= 16 per sequence: decode and
// speculative decode), ranked first and declining every other problem. Dense, ragged or paged
// K/V (pages of 16..256 rows, powers of two), GQA packed into the MMA's M (the query heads of
// one kv head, times the queries, 16 rows a CTA), f16/bf16, d_qk = d_v in {64, 128}, masks,
// softcap, sinks, device lengths, stats. Memory-bound: 16-byte cp.async row loads in a
// multi-stage pipeline, mma.sync m16n8k16 (sm_80 PTX, also on sm_90).
//
// Workspace (decode_plan.h): "decode_partial_o" f32 [rows, h_q, s_q, d_v], "decode_partial_lse"
// f32 [rows, h_q, s_q] (rows: b * (max_splits + 1), or max_splits * b in the batch-invariant
// mode) and "decode_arrivals" i32 [b, h_kv, row tiles], none when the batch-invariant mode has
// one split. max_splits is fixed at build from the envelope and the SM count (or ceil(s_kv /
// split_tokens)); the kernel splits each sequence by its device length, and the last CTA of a
// split sequence merges the partials by LSE in split order. Always bitwise deterministic.
#pragma once

#include "engines/engine.h"

namespace floe::detail {

const Engine& decode_engine();

}  // namespace floe::detail
