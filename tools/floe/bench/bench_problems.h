// What `floe bench` times (DESIGN §6) and what each problem is worth in FLOPs. Plain data and
// arithmetic, no CUDA: the CPU tests check the sweep and the FLOP count without a GPU.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "floe/problem.h"

namespace floe::tool {

// How q, k, v, o (and do, dq, dk, dv) lie in memory. bshd is [B, S, H, D]: the layout most
// frameworks hand over, served through strides (P4), never through a transpose.
enum class BenchLayout { bhsd, bshd };

struct BenchProblem {
  // "sweep" (DESIGN §6), "shapes" (the other shapes of PEERS.md), "features" (the cost of
  // one feature against "plain"), "custom" (from the command line).
  std::string group = "custom";
  // Within "features": plain gqa window bias bias_nograd sink softcap stats_gap bshd
  // deterministic. Empty elsewhere.
  std::string feature;
  DType dtype = DType::bf16;
  Shape shape;
  Mask mask;                                   // top-left; causal = right 0, no left
  std::optional<std::array<int64_t, 2>> bias;  // bias's leading dims ([1 or B, 1 or Hq])
  bool bias_grad = true;                       // the backward declares dBias (the bias's gradient)
  bool sink = false;
  std::optional<double> softcap;
  int64_t stats_gap = 0;  // extra elements after each stats row (a strided stats tensor)
  BenchLayout layout = BenchLayout::bhsd;
  bool deterministic = false;  // the plan's bitwise-deterministic mode (P7)
  // "serving" only (DESIGN 2.1, 2.2): the actual length of each batch's query and key side.
  // Without pages both sides are packed (THD) with these lengths and the shape is the
  // envelope (the longest); with pages the query side is dense and K/V sit in pages of
  // `page_size` rows, scattered by a seeded block table (forward only).
  std::vector<int64_t> seq_q, seq_kv;
  int64_t page_size = 0;
  // > 0: batch-invariant split-KV at multiples of this many keys (Problem::set_split_tokens).
  int64_t split_tokens = 0;
  // A decode with dense K/V [B, Hkv, S, D] (no lengths, no pages): see decode().
  bool dense_decode = false;
  std::string lengths;  // how seq_kv was drawn, where not uniform ("zipf"); part of the name

  bool ragged() const { return !seq_q.empty() && page_size == 0; }
  bool paged() const { return page_size > 0; }
  // A decode (paged with at most 16 queries a sequence, or dense_decode): bound by reading K
  // and V, reported in TB/s of K+V, timed as replayed CUDA graphs unless the bench says
  // otherwise. A paged problem with more queries is a chunked prefill, reported in TFLOP/s.
  bool decode() const { return (paged() && shape.s_q <= 16) || dense_decode; }
  // A paged K/V has no backward (DESIGN 2.2); the decodes are timed forward only.
  bool forward_only() const { return paged() || dense_decode; }
  int64_t total_q() const;   // tokens of the query side (the dense B*Sq when not ragged)
  int64_t total_kv() const;  // keys actually read: the sum of seq_kv, or B*Skv when dense
  // The cache's pages: ceil(seq_kv / page_size) summed over batches (each batch owns its pages;
  // the table's entries past a batch's length point at page 0 and are never read).
  int64_t num_pages() const;

  // Pure causal (top-left, right 0, no left): the one band the FlashAttention FLOP
  // convention halves.
  bool causal() const;
  // "b4 h16/2 s4096 d128 causal bias 1x16 bshd": every axis that differs from the defaults.
  std::string name() const;
};

// DESIGN §6's sweep (bf16, 16k tokens, hidden 2048, S 512..16384, D 64/128/256, causal and
// not), then the other shapes of PEERS.md, then the cost-of-features points.
std::vector<BenchProblem> standard_problems();
// The "serving" group, not part of the standard run (`floe bench --group serving`): a ragged
// causal prefill of 8 sequences of seeded mixed lengths, then paged decodes (Sq 1 and 4, page
// 16 and 64) at the batch and context sizes of SERVING.md §0, Zipf-skewed lengths at equal
// bytes, and dense-K/V decodes; GQA 32:8, d128, bf16.
std::vector<BenchProblem> serving_problems();
// The integer inputs of a serving problem, built on the host and uploaded before timing:
// offsets_q/offsets_kv (i32 [B + 1]) when ragged, seq_len_kv (i32 [B]) and block_table (i32 [B,
// max_pages], a seeded permutation of every page) when paged. Empty for the other groups.
std::vector<std::pair<TensorId, std::vector<int32_t>>> serving_inputs(const BenchProblem& bp);

// A few sweep points, for a smoke run.
std::vector<BenchProblem> quick_problems();
// The 1x1x128x64 problem whose execute() host cost `floe bench` reports.
BenchProblem host_overhead_problem();

// The Problem for one direction. The forward writes stats (the training forward, whose LSE
// the backward reads); both directions declare every shared tensor with the same strides, so
// one forward run lays out O and stats for the backward.
Problem make_problem(const BenchProblem& bp, Direction dir);

// The exact number of (i, j) pairs with key j visible to query i under `mask` (no padding),
// per (batch, head).
int64_t visible_pairs(int64_t s_q, int64_t s_kv, const Mask& mask);

struct FlopCount {
  double flops = 0;
  double pairs = 0;  // (i, j) pairs counted per (batch, head); per head, summed over batches,
                     // for a serving problem (rule "visible, summed")
  // How pairs were counted: "all" (Sq·Skv), "causal half" (Sq·Skv/2, the FlashAttention
  // convention the peers' numbers use) or "visible" (exact count, for any other band).
  std::string rule;
};

// Forward 2·B·Hq·pairs·(Dqk + Dv); backward 2.5x that (DESIGN §6). A serving problem counts
// the visible pairs of its actual lengths (2·Hq·Σ_b pairs_b·(Dqk + Dv)), never the envelope.
FlopCount count_flops(const BenchProblem& bp, Direction dir);

// The bytes of K and V a decode must read: Σ_b skv_b · Hkv · (Dqk + Dv) · element size
// (SERVING.md §0's "K+V read"); 0 for any other problem.
double kv_bytes_read(const BenchProblem& bp);

// The problem's shape and features as flat JSON fields (b, h_q, ..., causal, window, bias,
// sink, softcap, stats_gap, layout, deterministic, group, feature, name): what bench/peers.py reads
// back.
nlohmann::json problem_json(const BenchProblem& bp);

const char* to_string(BenchLayout layout);
const char* direction_name(Direction dir);  // "fwd" or "bwd"

}  // namespace floe::tool
