#include "bench_problems.h"

#include <algorithm>
#include <cstdio>

namespace floe::tool {

namespace {

// DESIGN §6: 16k tokens, hidden 2048.
constexpr int64_t kTokens = 16384;
constexpr int64_t kHidden = 2048;

BenchProblem sweep_point(int64_t s, int64_t d, bool causal) {
  BenchProblem bp;
  bp.group = "sweep";
  bp.shape = Shape{kTokens / s, kHidden / d, kHidden / d, s, s, d, d};
  if (causal) bp.mask.right = 0;
  return bp;
}

// The cost-of-features points: D 128, S 4096, B 4, Hq 16, non-causal; each differs from
// "plain" in one feature only, so its time relative to plain is that feature's cost.
BenchProblem feature_point(const std::string& feature) {
  BenchProblem bp = sweep_point(4096, 128, false);
  bp.group = "features";
  bp.feature = feature;
  if (feature == "gqa") bp.shape.h_kv = 2;
  if (feature == "window") {
    bp.mask.left = 1024;
    bp.mask.right = 0;
  }
  if (feature == "bias") bp.bias = std::array<int64_t, 2>{1, bp.shape.h_q};
  if (feature == "sink") bp.sink = true;
  if (feature == "softcap") bp.softcap = 30.0;
  if (feature == "stats_gap") bp.stats_gap = 64;
  if (feature == "bshd") bp.layout = BenchLayout::bshd;
  if (feature == "deterministic") bp.deterministic = true;
  return bp;
}

std::string bound(const std::optional<int64_t>& b) {
  return b ? std::to_string(*b) : std::string("-");
}

// Element strides of a [B, H, S, D] tensor stored as [B, S, H, D].
std::array<int64_t, 4> bshd_strides(const TensorDesc& d) {
  const int64_t h = d.dims[1], s = d.dims[2], e = d.dims[3];
  return {s * h * e, e, h * e, 1};
}

}  // namespace

bool BenchProblem::causal() const {
  return mask.align == MaskAlign::top_left && !mask.left && mask.right && *mask.right == 0;
}

std::string BenchProblem::name() const {
  const Shape& s = shape;
  std::string n = "b" + std::to_string(s.b) + " h" + std::to_string(s.h_q);
  if (s.h_kv != s.h_q) n += "/" + std::to_string(s.h_kv);
  n += " s" + std::to_string(s.s_q);
  if (s.s_kv != s.s_q) n += "x" + std::to_string(s.s_kv);
  n += " d" + std::to_string(s.d_qk);
  if (s.d_v != s.d_qk) n += "/" + std::to_string(s.d_v);
  if (causal()) {
    n += " causal";
  } else if (mask.is_band()) {
    n += " window " + bound(mask.left) + "," + bound(mask.right);
    if (mask.align == MaskAlign::bottom_right) n += " br";
  }
  if (bias) n += " bias " + std::to_string((*bias)[0]) + "x" + std::to_string((*bias)[1]);
  if (sink) n += " sink";
  if (softcap) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " softcap %g", *softcap);
    n += buf;
  }
  if (stats_gap > 0) n += " stats+" + std::to_string(stats_gap);
  if (layout == BenchLayout::bshd) n += " bshd";
  if (deterministic) n += " deterministic";
  if (dtype != DType::bf16) n += std::string(" ") + floe::to_string(dtype);
  return n;
}

std::vector<BenchProblem> standard_problems() {
  std::vector<BenchProblem> out;
  for (int64_t d : {64, 128, 256}) {
    for (int64_t s = 512; s <= kTokens; s *= 2) {
      for (bool causal : {false, true}) out.push_back(sweep_point(s, d, causal));
    }
  }
  // PEERS.md's other shapes. D 256 with Hq 8 is a sweep point already (hidden 2048), so it
  // is not timed twice; the report lists it among the other shapes.
  for (const auto& [s, causal] : {std::pair<int64_t, bool>{4096, false}, {16384, true}}) {
    BenchProblem mla = sweep_point(s, 128, causal);  // Dqk 192 / Dv 128, Hq 16
    mla.group = "shapes";
    mla.shape.d_qk = 192;
    out.push_back(mla);
    BenchProblem gqa = sweep_point(s, 128, causal);  // GQA 16:2
    gqa.group = "shapes";
    gqa.shape.h_kv = 2;
    out.push_back(gqa);
  }
  for (const char* f : {"plain", "gqa", "window", "bias", "sink", "softcap", "stats_gap", "bshd",
                        "deterministic"}) {
    out.push_back(feature_point(f));
  }
  return out;
}

std::vector<BenchProblem> quick_problems() {
  std::vector<BenchProblem> out;
  for (int64_t d : {64, 128}) {
    for (int64_t s : {1024, 4096}) {
      for (bool causal : {false, true}) out.push_back(sweep_point(s, d, causal));
    }
  }
  return out;
}

BenchProblem host_overhead_problem() {
  BenchProblem bp;
  bp.group = "host";
  bp.shape = Shape{1, 1, 1, 128, 128, 64, 64};
  return bp;
}

Problem make_problem(const BenchProblem& bp, Direction dir) {
  Problem p = dir == Direction::forward ? Problem::forward(bp.shape, bp.dtype).set_stats()
                                        : Problem::backward(bp.shape, bp.dtype);
  if (bp.mask.is_band()) p.set_mask(bp.mask);
  if (bp.bias) p.set_bias((*bp.bias)[0], (*bp.bias)[1]);
  if (bp.sink) p.set_sink();
  if (bp.softcap) p.set_softcap(*bp.softcap);
  if (bp.deterministic) p.set_deterministic();
  if (bp.stats_gap > 0) {
    const int64_t row = bp.shape.s_q + bp.stats_gap;
    p.set_strides(TensorId::stats, {bp.shape.h_q * row, row, 1});
  }
  if (bp.layout == BenchLayout::bshd) {
    for (TensorId id : {TensorId::q, TensorId::k, TensorId::v, TensorId::o, TensorId::d_o,
                        TensorId::dq, TensorId::dk, TensorId::dv}) {
      if (!p.has(id)) continue;
      const std::array<int64_t, 4> st = bshd_strides(*p.tensor(id));
      p.set_strides(id, {st[0], st[1], st[2], st[3]});
    }
  }
  return p;
}

int64_t visible_pairs(int64_t s_q, int64_t s_kv, const Mask& mask) {
  const int64_t off = mask.align == MaskAlign::bottom_right ? s_kv - s_q : 0;
  int64_t n = 0;
  for (int64_t i = 0; i < s_q; ++i) {
    const int64_t lo = mask.left ? std::max<int64_t>(0, i + off - *mask.left) : 0;
    const int64_t hi = mask.right ? std::min<int64_t>(s_kv - 1, i + off + *mask.right) : s_kv - 1;
    if (hi >= lo) n += hi - lo + 1;
  }
  return n;
}

FlopCount count_flops(const BenchProblem& bp, Direction dir) {
  const Shape& s = bp.shape;
  FlopCount f;
  const double all = static_cast<double>(s.s_q) * static_cast<double>(s.s_kv);
  if (!bp.mask.is_band()) {
    f.pairs = all;
    f.rule = "all";
  } else if (bp.causal() && s.s_q == s.s_kv) {
    // The convention of the FlashAttention papers and of PEERS.md (S²/2, not S(S+1)/2), so
    // that causal ratios against the peers compare like with like.
    f.pairs = all / 2;
    f.rule = "causal half";
  } else {
    f.pairs = static_cast<double>(visible_pairs(s.s_q, s.s_kv, bp.mask));
    f.rule = "visible";
  }
  f.flops = 2.0 * static_cast<double>(s.b) * static_cast<double>(s.h_q) * f.pairs *
            static_cast<double>(s.d_qk + s.d_v);
  if (dir == Direction::backward) f.flops *= 2.5;
  return f;
}

nlohmann::json problem_json(const BenchProblem& bp) {
  const Shape& s = bp.shape;
  nlohmann::json j;
  j["name"] = bp.name();
  j["group"] = bp.group;
  j["feature"] = bp.feature.empty() ? nlohmann::json() : nlohmann::json(bp.feature);
  j["dtype"] = floe::to_string(bp.dtype);
  j["b"] = s.b;
  j["h_q"] = s.h_q;
  j["h_kv"] = s.h_kv;
  j["s_q"] = s.s_q;
  j["s_kv"] = s.s_kv;
  j["d_qk"] = s.d_qk;
  j["d_v"] = s.d_v;
  j["causal"] = bp.causal();
  if (bp.mask.is_band() && !bp.causal()) {
    j["window"] = {{"left", bp.mask.left ? nlohmann::json(*bp.mask.left) : nlohmann::json()},
                   {"right", bp.mask.right ? nlohmann::json(*bp.mask.right) : nlohmann::json()},
                   {"align", bp.mask.align == MaskAlign::top_left ? "top_left" : "bottom_right"}};
  } else {
    j["window"] = nullptr;
  }
  j["bias"] = bp.bias ? nlohmann::json({(*bp.bias)[0], (*bp.bias)[1]}) : nlohmann::json();
  j["sink"] = bp.sink;
  j["softcap"] = bp.softcap ? nlohmann::json(*bp.softcap) : nlohmann::json();
  j["stats_gap"] = bp.stats_gap;
  j["layout"] = to_string(bp.layout);
  j["deterministic"] = bp.deterministic;
  return j;
}

const char* to_string(BenchLayout layout) {
  return layout == BenchLayout::bshd ? "bshd" : "bhsd";
}

const char* direction_name(Direction dir) {
  return dir == Direction::forward ? "fwd" : "bwd";
}

}  // namespace floe::tool
