#include "support/harness_named_problems.h"

#include "support/harness_random_problem.h"

namespace floe::test {

using nlohmann::json;

json problem_json(Direction direction, const char* dtype, int64_t b, int64_t h_q, int64_t h_kv,
                  int64_t s_q, int64_t s_kv, int64_t d_qk, int64_t d_v) {
  return json{{"op", direction == Direction::forward ? kOpForward : kOpBackward},
              {"dtype", dtype},
              {"b", b},
              {"h_q", h_q},
              {"h_kv", h_kv},
              {"s_q", s_q},
              {"s_kv", s_kv},
              {"d_qk", d_qk},
              {"d_v", d_v}};
}

namespace {

// Element strides of a [b, h, s, d] tensor stored as [b, s, h, d] with `pad` spare elements
// after each d row: the layout of a fused QKV projection viewed per head.
json bshd(int64_t h, int64_t s, int64_t d, int64_t pad) {
  const int64_t row = d + pad;
  return json::array({s * h * row, row, h * row, 1});
}

}  // namespace

std::vector<NamedProblem> named_problems(Direction dir) {
  const bool bwd = dir == Direction::backward;
  std::vector<NamedProblem> out;

  out.push_back({"plain", problem_json(dir, "bf16", 1, 4, 4, 64, 64, 64, 64)});

  json gqa = problem_json(dir, "f16", 2, 8, 2, 48, 80, 128, 64);
  gqa["mask"] = {{"align", "bottom_right"}, {"left", nullptr}, {"right", 0}};
  if (!bwd) gqa["stats"] = true;
  out.push_back({"gqa-causal-br", gqa});

  json mqa = problem_json(dir, "bf16", 2, 6, 1, 33, 70, 96, 96);
  mqa["bias"] = {1, 6};
  mqa["sink"] = true;
  mqa["softcap"] = 20.0;
  mqa["mask"] = {{"align", "top_left"}, {"left", 16}, {"right", 0}};
  mqa["seq_len_q"] = {33, 10};
  mqa["seq_len_kv"] = {70, 0};
  if (!bwd) mqa["stats"] = true;
  out.push_back({"mqa-bias-sink-softcap-window-padding", mqa});

  json strided = problem_json(dir, "f16", 2, 4, 2, 17, 19, 40, 24);
  json s = {{"q", bshd(4, 17, 40, 8)},
            {"k", bshd(2, 19, 40, 8)},
            {"v", bshd(2, 19, 24, 3)},
            {"o", bshd(4, 17, 24, 5)}};
  if (bwd) {
    s["do"] = bshd(4, 17, 24, 1);
    s["dq"] = bshd(4, 17, 40, 0);
    s["dk"] = bshd(2, 19, 40, 16);
    s["dv"] = bshd(2, 19, 24, 2);
    s["stats"] = {4 * 17 + 3, 1, 4};  // [b, s, h] with a gap per batch
  } else {
    strided["stats"] = true;
    s["stats"] = {4 * 17 + 3, 1, 4};
  }
  strided["strides"] = s;
  out.push_back({"strided-bshd", strided});

  json band = problem_json(dir, "bf16", 3, 4, 2, 40, 40, 64, 64);
  band["bias"] = {3, 1};
  band["sink"] = true;
  band["scale"] = 0.2;
  band["mask"] = {{"align", "top_left"}, {"left", 8}, {"right", 8}};
  band["seq_len_q"] = {40, 7, 0};
  band["seq_len_kv"] = {40, 40, 13};
  out.push_back({"band-bias-h-broadcast-padding", band});

  // A band of negative width (left + right < 0): no query sees any key. Before band_tiles.cuh
  // returned no tiles for it, sm80's backward (d64 tile, 128 x 128) counted key tile 2 as a
  // visitor of query tile 1 on one side and not the other, and its deterministic dQ order
  // waited forever.
  json none = problem_json(dir, "bf16", 1, 2, 2, 188, 351, 64, 64);
  none["mask"] = {{"align", "bottom_right"}, {"left", 19}, {"right", -88}};
  if (!bwd) none["stats"] = true;
  out.push_back({"negative-width-band", none});
  return out;
}

std::vector<NamedProblem> deterministic_problems(Direction dir) {
  std::vector<NamedProblem> out = named_problems(dir);
  // Shapes the sm90 engine serves (d_qk = d_v = 128, 64 or 256, 192 / 128; softcap and sink), with
  // several key tiles (128 keys) adding into every query tile (80 rows at d128, 64 at d64, 48 at
  // d192x128): unordered, their fp32 adds differ in rounding from run to run (the default mode's dQ
  // differs bitwise between runs on such shapes), so only the ordered mode passes. GQA (the dQ of
  // every query head of a kv group), bottom-right causal with padding lengths (visitor sets that
  // differ by batch and query tile), a window, a long key side (12 visitors per query tile), and
  // 192 / 128 (dQ computed in thirds) with GQA, causal and key lengths; and sm90's softcap kernel
  // with its dSink step (a fixed-order fp64 sum) under GQA, causal and key lengths.
  json gqa = problem_json(dir, "bf16", 2, 4, 2, 400, 700, 128, 128);
  gqa["mask"] = {{"align", "bottom_right"}, {"left", nullptr}, {"right", 0}};
  gqa["seq_len_q"] = {400, 233};
  gqa["seq_len_kv"] = {700, 517};
  if (dir == Direction::forward) gqa["stats"] = true;
  out.push_back({"sm90-gqa-causal-br-padding", gqa});
  json wide = problem_json(dir, "bf16", 1, 1, 1, 1024, 1536, 128, 128);
  out.push_back({"sm90-long-keys", wide});
  json window = problem_json(dir, "bf16", 2, 4, 4, 500, 700, 64, 64);
  window["mask"] = {{"align", "top_left"}, {"left", 300}, {"right", 40}};
  window["seq_len_kv"] = {700, 450};
  out.push_back({"sm90-d64-window-padding", window});
  json mla = problem_json(dir, "bf16", 2, 4, 2, 300, 900, 192, 128);
  mla["mask"] = {{"align", "bottom_right"}, {"left", nullptr}, {"right", 0}};
  mla["seq_len_kv"] = {900, 611};
  if (dir == Direction::forward) mla["stats"] = true;
  out.push_back({"sm90-d192x128-gqa-causal-padding", mla});
  json capped = problem_json(dir, "f16", 2, 4, 2, 300, 600, 128, 128);
  capped["softcap"] = 30.0;
  capped["sink"] = true;
  capped["mask"] = {{"align", "bottom_right"}, {"left", nullptr}, {"right", 0}};
  capped["seq_len_kv"] = {600, 411};
  if (dir == Direction::forward) capped["stats"] = true;
  out.push_back({"sm90-softcap-sink-gqa-causal-padding", capped});
  // d256 (the wide kernel: 64-key tiles, dQ added from registers by the turn keeper's order): 11
  // key tiles, up to 11 visitors a query tile.
  json wide256 = problem_json(dir, "bf16", 2, 4, 2, 300, 700, 256, 256);
  wide256["mask"] = {{"align", "bottom_right"}, {"left", nullptr}, {"right", 0}};
  wide256["seq_len_kv"] = {700, 455};
  if (dir == Direction::forward) wide256["stats"] = true;
  out.push_back({"sm90-d256-gqa-causal-padding", wide256});
  // A dBias summed over a broadcast dim (sm90's turns per accumulator tile, bwd_dbias_order.cuh;
  // keys a multiple of 8, whole 16-byte rows): over the batch under GQA with lengths that differ
  // by batch (a pair that visits a tile after one that does not), over the heads at d64 under a
  // window, over both at d192 / 128 with padded keys. The forward direction has the same bias.
  json dbias_b = problem_json(dir, "bf16", 3, 4, 2, 300, 520, 128, 128);
  dbias_b["bias"] = {1, 4};
  dbias_b["mask"] = {{"align", "bottom_right"}, {"left", nullptr}, {"right", 0}};
  dbias_b["seq_len_q"] = {300, 211, 300};
  dbias_b["seq_len_kv"] = {520, 333, 97};
  out.push_back({"sm90-dbias-batch-sum-gqa-causal-padding", dbias_b});
  json dbias_h = problem_json(dir, "f16", 2, 4, 4, 256, 640, 64, 64);
  dbias_h["bias"] = {2, 1};
  dbias_h["mask"] = {{"align", "top_left"}, {"left", 300}, {"right", 100}};
  out.push_back({"sm90-dbias-head-sum-d64-window", dbias_h});
  json dbias_bh = problem_json(dir, "bf16", 2, 3, 3, 200, 384, 192, 128);
  dbias_bh["bias"] = {1, 1};
  dbias_bh["seq_len_kv"] = {384, 250};
  out.push_back({"sm90-dbias-both-sums-d192x128-padding", dbias_bh});
  for (NamedProblem& p : out) p.json["deterministic"] = true;
  return out;
}

}  // namespace floe::test
