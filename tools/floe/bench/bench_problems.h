// What `floe bench` times (DESIGN §6) and what each problem is worth in FLOPs. Plain data and
// arithmetic, no CUDA: the CPU tests check the sweep and the FLOP count without a GPU.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
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
  // Within "features": plain gqa window bias sink softcap stats_gap bshd deterministic. Empty
  // elsewhere.
  std::string feature;
  DType dtype = DType::bf16;
  Shape shape;
  Mask mask;                                   // top-left; causal = right 0, no left
  std::optional<std::array<int64_t, 2>> bias;  // bias's leading dims ([1 or B, 1 or Hq])
  bool sink = false;
  std::optional<double> softcap;
  int64_t stats_gap = 0;  // extra elements after each stats row (a strided stats tensor)
  BenchLayout layout = BenchLayout::bhsd;
  bool deterministic = false;  // the plan's bitwise-deterministic mode (P7)

  // Pure causal (top-left, right 0, no left): the one band the FlashAttention FLOP
  // convention halves.
  bool causal() const;
  // "b4 h16/2 s4096 d128 causal bias 1x16 bshd": every axis that differs from the defaults.
  std::string name() const;
};

// DESIGN §6's sweep (bf16, 16k tokens, hidden 2048, S 512..16384, D 64/128/256, causal and
// not), then the other shapes of PEERS.md, then the cost-of-features points.
std::vector<BenchProblem> standard_problems();
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
  double pairs = 0;  // (i, j) pairs counted per (batch, head)
  // How pairs were counted: "all" (Sq·Skv), "causal half" (Sq·Skv/2, the FlashAttention
  // convention the peers' numbers use) or "visible" (exact count, for any other band).
  std::string rule;
};

// Forward 2·B·Hq·pairs·(Dqk + Dv); backward 2.5x that (DESIGN §6).
FlopCount count_flops(const BenchProblem& bp, Direction dir);

// The problem's shape and features as flat JSON fields (b, h_q, ..., causal, window, bias,
// sink, softcap, stats_gap, layout, deterministic, group, feature, name): what bench/peers.py reads back.
nlohmann::json problem_json(const BenchProblem& bp);

const char* to_string(BenchLayout layout);
const char* direction_name(Direction dir);  // "fwd" or "bwd"

}  // namespace floe::tool
