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
  if (feature == "bias" || feature == "bias_nograd")
    bp.bias = std::array<int64_t, 2>{1, bp.shape.h_q};
  // A bias that needs no gradient (an additive mask, ALiBi): what the peers' bias backward
  // computes.
  if (feature == "bias_nograd") bp.bias_grad = false;
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

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Fixed seeds: the serving problems, their lengths and tables are the same in every run.
constexpr uint64_t kLengthSeed = 16;
constexpr uint64_t kTableSeed = 1616;

Mask causal_bottom_right() {
  Mask m;
  m.align = MaskAlign::bottom_right;
  m.right = 0;
  return m;
}

// GQA 32:8, d128, causal aligned bottom-right (a query sees its own position and the past).
BenchProblem serving_point(int64_t b, int64_t s_q, int64_t s_kv) {
  BenchProblem bp;
  bp.group = "serving";
  bp.shape = Shape{b, 32, 8, s_q, s_kv, 128, 128};
  bp.mask = causal_bottom_right();
  return bp;
}

// Eight packed sequences of 128..4096 tokens, drawn once from a fixed seed.
BenchProblem ragged_prefill() {
  constexpr int64_t kB = 8, kMin = 128, kMax = 4096;
  std::vector<int64_t> len(kB);
  uint64_t state = kLengthSeed;
  for (int64_t& n : len) n = kMin + static_cast<int64_t>(splitmix64(state) % (kMax - kMin + 1));
  const int64_t longest = *std::max_element(len.begin(), len.end());
  BenchProblem bp = serving_point(kB, longest, longest);
  bp.seq_q = bp.seq_kv = len;
  return bp;
}

// SERVING.md §0's skewed varlen set: sixteen sequences of 138..2069 tokens, 16384 in all, MHA
// Hq 16, d128, causal (PyTorch's varlen_attn: 214 TFLOP/s there). The lengths were drawn once
// (Python's random, seed 16, then fixed here) so that every run and every peer times the same
// batch; its dense twin at equal tokens is the sweep's b16 h16 s1024 d128 causal.
BenchProblem skewed_prefill() {
  const std::vector<int64_t> len = {1887, 1098, 955, 149, 1052, 2069, 991, 668,
                                    1484, 878,  976, 721, 1594, 1122, 138, 602};
  const int64_t longest = *std::max_element(len.begin(), len.end());
  BenchProblem bp;
  bp.group = "serving";
  bp.shape = Shape{static_cast<int64_t>(len.size()), 16, 16, longest, longest, 128, 128};
  bp.mask = causal_bottom_right();
  bp.seq_q = bp.seq_kv = len;
  return bp;
}

BenchProblem paged_point(int64_t b, int64_t s_q, int64_t s_kv, int64_t page) {
  BenchProblem bp = serving_point(b, s_q, s_kv);
  bp.seq_q.assign(static_cast<size_t>(b), s_q);
  bp.seq_kv.assign(static_cast<size_t>(b), s_kv);
  bp.page_size = page;
  return bp;
}

// B sequences whose key lengths follow Zipf's law (length of rank r proportional to 1/r, the
// ranks in a seeded order over the batch), scaled to `total` keys: the same bytes as a uniform
// batch of total / B, one long context and a tail of short ones. The envelope is the longest.
BenchProblem zipf_decode(int64_t b, int64_t total, int64_t page) {
  std::vector<double> w(static_cast<size_t>(b));
  double sum = 0;
  for (int64_t r = 0; r < b; ++r)
    sum += w[static_cast<size_t>(r)] = 1.0 / static_cast<double>(r + 1);
  std::vector<int64_t> len(static_cast<size_t>(b));
  int64_t given = 0;
  for (size_t r = 0; r < len.size(); ++r) {
    len[r] = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(total) * w[r] / sum));
    given += len[r];
  }
  len[0] += total - given;  // the rounding's remainder to the longest: exactly `total` keys
  uint64_t state = kLengthSeed;
  for (size_t i = len.size(); i > 1; --i) std::swap(len[i - 1], len[splitmix64(state) % i]);
  const int64_t longest = *std::max_element(len.begin(), len.end());
  BenchProblem bp = paged_point(b, 1, longest, page);
  bp.seq_kv = len;
  bp.lengths = "zipf";
  return bp;
}

// A decode with dense K/V [B, Hkv, S, D]: the layout of SERVING.md §0's cuDNN anchor.
BenchProblem dense_decode(int64_t b, int64_t s_kv) {
  BenchProblem bp = serving_point(b, 1, s_kv);
  bp.dense_decode = true;
  return bp;
}

int64_t sum_of(const std::vector<int64_t>& v) {
  int64_t n = 0;
  for (int64_t x : v) n += x;
  return n;
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

int64_t BenchProblem::total_q() const {
  return ragged() ? sum_of(seq_q) : shape.b * shape.s_q;
}

int64_t BenchProblem::total_kv() const {
  return seq_kv.empty() ? shape.b * shape.s_kv : sum_of(seq_kv);
}

int64_t BenchProblem::num_pages() const {
  if (!paged()) return 0;
  int64_t n = 0;
  for (int64_t len : seq_kv) n += (len + page_size - 1) / page_size;
  return n;
}

std::string BenchProblem::name() const {
  const Shape& s = shape;
  if (ragged() || paged() || dense_decode) {
    // "ragged b8 h32/8 t17000 max4000 d128 causal br", "paged b32 h32/8 q1 kv4096 p16 d128",
    // "dense b1 h32/8 q1 kv32768 d128 causal br"
    std::string n = std::string(ragged() ? "ragged" : (paged() ? "paged" : "dense")) + " b" +
                    std::to_string(s.b) + " h" + std::to_string(s.h_q) + "/" +
                    std::to_string(s.h_kv);
    if (ragged()) {
      n += " t" + std::to_string(total_q()) + " max" + std::to_string(s.s_q);
    } else {
      n += " q" + std::to_string(s.s_q) + " kv" + std::to_string(s.s_kv);
      if (paged()) n += " p" + std::to_string(page_size);
    }
    n += " d" + std::to_string(s.d_qk);
    if (mask.align == MaskAlign::bottom_right && !mask.left && mask.right && *mask.right == 0) {
      n += " causal br";
    }
    if (split_tokens > 0) n += " split" + std::to_string(split_tokens);
    if (!lengths.empty()) n += " " + lengths;
    return n;
  }
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
  if (bias && !bias_grad) n += " nograd";
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
  for (const char* f : {"plain", "gqa", "window", "bias", "bias_nograd", "sink", "softcap",
                        "stats_gap", "bshd", "deterministic"}) {
    out.push_back(feature_point(f));
  }
  return out;
}

std::vector<BenchProblem> serving_problems() {
  std::vector<BenchProblem> out = {ragged_prefill(), skewed_prefill()};
  // SERVING.md §0's B 32 S 4k and B 64 S 8k (cuDNN dense: 4.25 and 4.44 TB/s), and a 16k
  // context; Sq 4 is a speculative decode.
  for (const auto& [b, s_kv] : {std::pair<int64_t, int64_t>{32, 4096}, {64, 8192}, {64, 16384}}) {
    for (int64_t page : {16, 64}) {
      for (int64_t s_q : {1, 4}) out.push_back(paged_point(b, s_q, s_kv, page));
    }
  }
  // The rest of SERVING.md §0's decode shapes (cuDNN dense: B 1 S 32k 3.30 TB/s, B 1 S 128k
  // 4.15, B 8 S 8k 3.82, B 128 S 16k 4.46), page 16, one query.
  for (const auto& [b, s_kv] :
       {std::pair<int64_t, int64_t>{1, 32768}, {1, 131072}, {8, 8192}, {128, 16384}}) {
    out.push_back(paged_point(b, 1, s_kv, 16));
  }
  // The batch-invariant mode (splits of 1024 keys whatever the batch), against the same
  // shapes above: the goal is at most 10% slower.
  for (const auto& [b, s_kv] : {std::pair<int64_t, int64_t>{1, 32768}, {8, 8192}, {64, 8192}}) {
    BenchProblem bp = paged_point(b, 1, s_kv, 16);
    bp.split_tokens = 1024;
    out.push_back(bp);
  }
  // Skewed lengths at the bytes of B 64 S 8k and B 32 S 4k (goal: within 5% of uniform), and
  // dense K/V at SERVING.md §0's two small-batch shapes (the pages' cost, against the same
  // layout as the cuDNN anchor).
  out.push_back(zipf_decode(64, 64 * 8192, 16));
  out.push_back(zipf_decode(32, 32 * 4096, 16));
  out.push_back(dense_decode(1, 32768));
  out.push_back(dense_decode(8, 8192));
  // A chunked prefill over a paged cache: 1024 new tokens a sequence after 7168 cached ones,
  // pages of 64 and 16 rows, and its dense twin (the pages' cost; keys [B, Hkv, S, D]).
  out.push_back(paged_point(8, 1024, 8192, 64));
  out.push_back(paged_point(8, 1024, 8192, 16));
  out.push_back(serving_point(8, 1024, 8192));
  return out;
}

std::vector<std::pair<TensorId, std::vector<int32_t>>> serving_inputs(const BenchProblem& bp) {
  std::vector<std::pair<TensorId, std::vector<int32_t>>> out;
  if (bp.ragged()) {
    std::vector<int32_t> q(1, 0), kv(1, 0);
    for (size_t b = 0; b < bp.seq_q.size(); ++b) {
      q.push_back(q.back() + static_cast<int32_t>(bp.seq_q[b]));
      kv.push_back(kv.back() + static_cast<int32_t>(bp.seq_kv[b]));
    }
    out.emplace_back(TensorId::offsets_q, std::move(q));
    out.emplace_back(TensorId::offsets_kv, std::move(kv));
  }
  if (bp.paged()) {
    std::vector<int32_t> len(bp.seq_kv.begin(), bp.seq_kv.end());
    out.emplace_back(TensorId::seq_len_kv, std::move(len));
    // Every page used once, in a seeded random order (Fisher-Yates): batch b's keys are
    // scattered over the cache, as a server's are after a while. Entries past a batch's
    // length are 0 (never read).
    std::vector<int32_t> order(static_cast<size_t>(bp.num_pages()));
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    uint64_t state = kTableSeed;
    for (size_t i = order.size(); i > 1; --i) {
      std::swap(order[i - 1], order[splitmix64(state) % i]);
    }
    const int64_t max_pages = (bp.shape.s_kv + bp.page_size - 1) / bp.page_size;
    std::vector<int32_t> table(static_cast<size_t>(bp.shape.b * max_pages), 0);
    size_t next = 0;
    for (size_t b = 0; b < bp.seq_kv.size(); ++b) {
      const int64_t pages = (bp.seq_kv[b] + bp.page_size - 1) / bp.page_size;
      for (int64_t k = 0; k < pages; ++k) {
        table[b * static_cast<size_t>(max_pages) + static_cast<size_t>(k)] = order[next++];
      }
    }
    out.emplace_back(TensorId::block_table, std::move(table));
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
  if (bp.ragged()) p.set_ragged_q(bp.total_q()).set_ragged_kv(bp.total_kv());
  if (bp.paged()) p.set_paged_kv(bp.page_size, bp.num_pages());
  if (bp.mask.is_band()) p.set_mask(bp.mask);
  if (bp.bias) p.set_bias((*bp.bias)[0], (*bp.bias)[1]);
  if (bp.bias && !bp.bias_grad) p.set_bias_grad(false);
  if (bp.sink) p.set_sink();
  if (bp.softcap) p.set_softcap(*bp.softcap);
  if (bp.deterministic) p.set_deterministic();
  if (bp.split_tokens > 0) p.set_split_tokens(bp.split_tokens);
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
  if (bp.ragged() || bp.paged()) {
    for (size_t b = 0; b < bp.seq_kv.size(); ++b) {
      f.pairs += static_cast<double>(visible_pairs(bp.seq_q[b], bp.seq_kv[b], bp.mask));
    }
    f.rule = "visible, summed";
    f.flops = 2.0 * static_cast<double>(s.h_q) * f.pairs * static_cast<double>(s.d_qk + s.d_v);
    if (dir == Direction::backward) f.flops *= 2.5;
    return f;
  }
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

double kv_bytes_read(const BenchProblem& bp) {
  if (!bp.decode()) return 0;
  return static_cast<double>(bp.total_kv()) * static_cast<double>(bp.shape.h_kv) *
         static_cast<double>(bp.shape.d_qk + bp.shape.d_v) * static_cast<double>(size_of(bp.dtype));
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
  j["bias_grad"] = bp.bias.has_value() && bp.bias_grad;
  j["sink"] = bp.sink;
  j["softcap"] = bp.softcap ? nlohmann::json(*bp.softcap) : nlohmann::json();
  j["stats_gap"] = bp.stats_gap;
  j["layout"] = to_string(bp.layout);
  j["deterministic"] = bp.deterministic;
  // Serving: peers.py reports these records as n/a (no peer call expresses them).
  j["ragged"] = bp.ragged();
  j["page_size"] = bp.paged() ? nlohmann::json(bp.page_size) : nlohmann::json();
  if (bp.ragged() || bp.paged()) {
    if (bp.ragged()) j["layout"] = "thd";  // packed tokens, no batch dimension
    j["total_q"] = bp.total_q();
    j["total_kv"] = bp.total_kv();
    j["seq_q"] = bp.seq_q;
    j["seq_kv"] = bp.seq_kv;
    j["num_pages"] = bp.paged() ? nlohmann::json(bp.num_pages()) : nlohmann::json();
  }
  return j;
}

const char* to_string(BenchLayout layout) {
  return layout == BenchLayout::bshd ? "bshd" : "bhsd";
}

const char* direction_name(Direction dir) {
  return dir == Direction::forward ? "fwd" : "bwd";
}

}  // namespace floe::tool
