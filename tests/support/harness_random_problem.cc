#include "support/harness_random_problem.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <sstream>

#include "support/harness_env.h"
#include "support/harness_runner.h"

namespace floe::test {

namespace {

using nlohmann::json;

// A length: 1 with probability p_one, else small (2..16), medium (17..128) or large.
int64_t draw_length(Rng& rng, int64_t max_len, double p_one) {
  const double u = rng.uniform();
  if (max_len <= 1 || u < p_one) return 1;
  if (u < p_one + 0.30 || max_len <= 16) return rng.between(2, std::min<int64_t>(16, max_len));
  if (u < p_one + 0.68 || max_len <= 128) return rng.between(17, std::min<int64_t>(128, max_len));
  return rng.between(129, max_len);
}

// A head dim: the common 64 and 128, the largest, or any multiple of 8.
int64_t draw_head_dim(Rng& rng, int64_t max_d) {
  const double u = rng.uniform();
  if (u < 0.30) {
    const int64_t d = rng.chance(0.5) ? 64 : 128;
    if (d <= max_d) return d;
  } else if (u < 0.40) {
    return max_d / 8 * 8;
  }
  return 8 * rng.between(1, max_d / 8);
}

// Element strides for dims in a random order (innermost first), with an inner stride above 1
// now and then, gaps between dims, and odd or zero strides on size-1 dims: any layout a
// framework may hand over, and some it would not. Never overlapping.
// With `aligned`, the last dim stays innermost with stride 1 and every gap is a multiple of 8
// elements: the 16-byte rows tensor-core engines need (when the innermost dim is too).
std::vector<int64_t> random_strides(Rng& rng, const std::vector<int64_t>& dims, bool aligned,
                                    bool* inner_gap, bool* odd_unit) {
  const int rank = static_cast<int>(dims.size());
  std::vector<int> order(rank);  // innermost first
  for (int i = 0; i < rank; ++i) order[i] = rank - 1 - i;
  if (rng.chance(0.6)) {
    for (int i = rank - 1; i > (aligned ? 1 : 0); --i) {
      std::swap(order[i], order[rng.between(aligned ? 1 : 0, i)]);
    }
  }
  std::vector<int64_t> strides(rank, 0);
  int64_t next = !aligned && rng.chance(0.15) ? rng.between(2, 3) : 1;
  *inner_gap |= next > 1;
  for (int idx : order) {
    if (dims[idx] == 1) {
      const std::vector<int64_t> odd = {0, 1, 3, 7, 1001, 65537};
      strides[idx] = rng.chance(0.5) ? rng.pick(odd) : rng.between(0, 100000);
      *odd_unit = true;
      continue;
    }
    strides[idx] = next;
    const int64_t gap = rng.chance(0.3) ? rng.between(1, 9) : 0;
    next = next * dims[idx] + (aligned ? 8 * gap : gap);
  }
  return strides;
}

std::vector<int64_t> packed_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size());
  int64_t stride = 1;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    s[i] = stride;
    stride *= dims[i];
  }
  return s;
}

// The logical dims of each tensor the case JSON may give strides for.
std::vector<int64_t> dims_of(const std::string& name, const json& j) {
  const int64_t b = j["b"], hq = j["h_q"], hkv = j["h_kv"], sq = j["s_q"], skv = j["s_kv"];
  const int64_t dqk = j["d_qk"], dv = j["d_v"];
  if (name == "q" || name == "dq") return {b, hq, sq, dqk};
  if (name == "k" || name == "dk") return {b, hkv, skv, dqk};
  if (name == "v" || name == "dv") return {b, hkv, skv, dv};
  if (name == "o" || name == "do") return {b, hq, sq, dv};
  if (name == "stats") return {b, hq, sq};
  if (name == "bias" || name == "dbias") return {j["bias"][0], j["bias"][1], sq, skv};
  return {};
}

bool is_true(const json& j, const char* key) {
  return j.contains(key) && j[key].is_boolean() && j[key].get<bool>();
}

std::optional<int64_t> opt_int(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<int64_t>();
}

// True when some valid query row of the case sees no key (mask or zero kv length).
bool has_empty_rows(const json& j) {
  const int64_t b = j["b"], sq = j["s_q"], skv = j["s_kv"];
  std::optional<int64_t> left, right;
  bool bottom_right = false;
  if (j.contains("mask") && j["mask"].is_object()) {
    left = opt_int(j["mask"], "left");
    right = opt_int(j["mask"], "right");
    bottom_right = j["mask"].value("align", "top_left") == "bottom_right";
  }
  for (int64_t bi = 0; bi < b; ++bi) {
    const int64_t lq = j.contains("seq_len_q") && !j["seq_len_q"].is_null()
                           ? j["seq_len_q"][bi].get<int64_t>()
                           : sq;
    const int64_t lk = j.contains("seq_len_kv") && !j["seq_len_kv"].is_null()
                           ? j["seq_len_kv"][bi].get<int64_t>()
                           : skv;
    const int64_t off = bottom_right ? lk - lq : 0;
    for (int64_t i = 0; i < lq; ++i) {
      const int64_t lo = std::max<int64_t>(0, left ? i + off - *left : 0);
      const int64_t hi = std::min<int64_t>(lk - 1, right ? i + off + *right : lk - 1);
      if (lo > hi) return true;
    }
  }
  return false;
}

json random_lengths(Rng& rng, int64_t b, int64_t max_len, bool* zero) {
  json lens = json::array();
  for (int64_t i = 0; i < b; ++i) {
    const double u = rng.uniform();
    int64_t len = u < 0.12 ? 0 : u < 0.35 ? max_len : rng.between(1, max_len);
    *zero |= len == 0;
    lens.push_back(len);
  }
  return lens;
}

void add(std::vector<std::string>* f, const std::string& name) {
  if (f != nullptr) f->push_back(name);
}

}  // namespace

GeneratorLimits generator_limits(const std::string& level) {
  GeneratorLimits l;
  if (level == "smoke") {  // compute-sanitizer runs these, 10 to 100 times slower
    l.max_b = 2;
    l.max_h_q = 4;
    l.max_s_q = 160;  // still several key and query tiles
    l.max_s_kv = 200;
    l.max_d = 128;
    l.max_work = int64_t{1} << 22;
  }
  return l;
}

tool::HostArray random_array(Rng& rng, const std::vector<int64_t>& shape, double lo, double hi) {
  tool::HostArray a;
  a.shape = shape;
  const int64_t n = std::accumulate(shape.begin(), shape.end(), int64_t{1},
                                    [](int64_t x, int64_t y) { return x * y; });
  a.data.resize(static_cast<size_t>(n));
  for (float& x : a.data) {
    const double m = rng.uniform(lo, hi);
    x = static_cast<float>(rng.chance(0.5) ? m : -m);
  }
  return a;
}

json random_problem_json(Rng& rng, Direction direction, const GeneratorLimits& lim,
                         std::vector<std::string>* features) {
  const bool bwd = direction == Direction::backward;
  json j;
  j["op"] = bwd ? kOpBackward : kOpForward;
  j["dtype"] = rng.chance(0.5) ? "bf16" : "f16";
  add(features, bwd ? "backward" : "forward");
  add(features, j["dtype"].get<std::string>());

  // Shape: redrawn until the reference's work fits (a few tries at most in practice).
  int64_t b = 1, hq = 1, hkv = 1, sq = 1, skv = 1, dqk = 64, dv = 64;
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const double u = rng.uniform();
    b = std::min<int64_t>(lim.max_b, u < 0.45 ? 1 : u < 0.8 ? 2 : 3);
    const double h = rng.uniform();
    int64_t group = 1;
    if (h < 0.2) {  // MHA
      hkv = rng.between(1, 4);
    } else if (h < 0.45) {  // MQA
      hkv = 1;
      group = rng.between(2, 8);
    } else {  // GQA
      hkv = rng.between(1, 3);
      group = rng.pick(std::vector<int64_t>{1, 2, 3, 4, 5, 8});
    }
    hq = hkv * group;
    if (hq > lim.max_h_q) continue;
    sq = draw_length(rng, lim.max_s_q, 0.12);
    skv = draw_length(rng, lim.max_s_kv, 0.10);
    // FLOE_KEYS_MULTIPLE: drawn, then rounded up (down where that passes the limit).
    if (const int64_t m = harness_settings().keys_multiple; m > 1) {
      skv = std::max(m, std::min((skv + m - 1) / m, lim.max_s_kv / m) * m);
    }
    dqk = draw_head_dim(rng, lim.max_d);
    dv = rng.chance(0.5) ? dqk : draw_head_dim(rng, lim.max_d);
    if (harness_settings().head_dim_qk > 0) {  // FLOE_HEAD_DIMS: drawn, then replaced
      dqk = harness_settings().head_dim_qk;
      dv = harness_settings().head_dim_v;
    }
    if (b * hq * sq * skv * (dqk + dv) <= lim.max_work) break;
    b = hq = hkv = sq = skv = 1;  // the fallback if no draw fits
    dqk = dv = 8;
  }
  j["b"] = b;
  j["h_q"] = hq;
  j["h_kv"] = hkv;
  j["s_q"] = sq;
  j["s_kv"] = skv;
  j["d_qk"] = dqk;
  j["d_v"] = dv;
  if (b > 1) add(features, "batch>1");
  add(features, hq == hkv ? "mha" : hkv == 1 ? "mqa" : "gqa");
  if (sq == 1) add(features, "s_q=1");
  if (skv == 1) add(features, "s_kv=1");
  if (sq > skv) add(features, "s_q>s_kv");
  if (sq % 2 == 1 && sq > 1) add(features, "s_q odd");
  if (dqk != dv) add(features, "d_qk!=d_v");
  if (dqk % 64 != 0 || dv % 64 != 0) add(features, "d not 64k");
  if (std::max(dqk, dv) > 128) add(features, "d>128");

  // Optional features, each drawn independently.
  if (rng.chance(0.30)) {
    j["bias"] = {rng.chance(0.5) ? int64_t{1} : b, rng.chance(0.5) ? int64_t{1} : hq};
    add(features, "bias");
    if (j["bias"][0] == 1 && b > 1) add(features, "bias b-broadcast");
    if (j["bias"][1] == 1 && hq > 1) add(features, "bias h-broadcast");
  } else {
    j["bias"] = nullptr;
  }
  j["sink"] = rng.chance(0.25);
  if (j["sink"].get<bool>()) add(features, "sink");
  if (rng.chance(0.20)) {
    j["softcap"] = rng.uniform(2.0, 50.0);
    add(features, "softcap");
  } else {
    j["softcap"] = nullptr;
  }
  if (rng.chance(0.25)) {
    // A multiple of the default keeps the scores in a range where softmax is neither flat
    // nor one-hot; now and then negative, which validation allows and a kernel that takes
    // the row max before scaling gets wrong.
    double scale = rng.uniform(0.25, 2.5) / std::sqrt(static_cast<double>(dqk));
    if (rng.chance(0.12)) {
      scale = -scale;
      add(features, "negative scale");
    }
    j["scale"] = scale;
    add(features, "scale");
  } else {
    j["scale"] = nullptr;
  }
  j["stats"] = bwd ? true : rng.chance(0.5);
  if (!bwd && j["stats"].get<bool>()) add(features, "stats");
  j["deterministic"] = rng.chance(0.3);
  if (j["deterministic"].get<bool>()) add(features, "deterministic");

  // Mask.
  const double m = rng.uniform();
  json mask = {{"align", rng.chance(0.5) ? "top_left" : "bottom_right"},
               {"left", nullptr},
               {"right", nullptr}};
  const int64_t span = std::max(sq, skv);
  std::string kind;
  if (m < 0.28) {
    kind = "none";
  } else if (m < 0.48) {
    kind = "causal";
    mask["right"] = 0;
  } else if (m < 0.60) {
    kind = "window";
    mask["left"] = rng.between(0, span);
    mask["right"] = 0;
  } else if (m < 0.70) {
    kind = "left-only";
    mask["left"] = rng.between(-3, span);
  } else if (m < 0.80) {
    kind = "right-only";
    mask["right"] = rng.between(-3, span);
  } else {
    kind = "band";
    const int64_t left = rng.between(-span / 2 - 1, span);
    // One band in three is empty somewhere: left + right < 0 leaves no key for any row.
    const int64_t right =
        rng.chance(0.3) ? rng.between(-span - 2, -left - 1) : rng.between(-left, span);
    mask["left"] = left;
    mask["right"] = right;
  }
  add(features, "mask " + kind);
  if (kind == "none") {
    j["mask"] = nullptr;
  } else {
    j["mask"] = mask;
    add(features, std::string("align ") + mask["align"].get<std::string>());
  }

  // Padding: actual lengths from device arrays, zero lengths included.
  bool zero = false;
  j["seq_len_q"] = rng.chance(0.3) ? random_lengths(rng, b, sq, &zero) : json(nullptr);
  j["seq_len_kv"] = rng.chance(0.3) ? random_lengths(rng, b, skv, &zero) : json(nullptr);
  if (!j["seq_len_q"].is_null()) add(features, "padding q");
  if (!j["seq_len_kv"].is_null()) add(features, "padding kv");
  if (zero) add(features, "zero length");
  if (has_empty_rows(j)) add(features, "empty rows");

  // Layouts, for every tensor the problem declares.
  std::vector<std::string> names = {"q", "k", "v", "o"};
  if (j["stats"].get<bool>()) names.push_back("stats");
  if (!j["bias"].is_null()) names.push_back("bias");
  if (bwd) {
    for (const char* n : {"do", "dq", "dk", "dv"}) names.push_back(n);
    if (!j["bias"].is_null()) names.push_back("dbias");
  }
  json strides = json::object();
  bool inner_gap = false, odd_unit = false, strided_in = false, strided_out = false;
  for (const std::string& name : names) {
    if (rng.chance(0.4)) continue;  // packed
    const std::vector<int64_t> dims = dims_of(name, j);
    const std::vector<int64_t> s =
        random_strides(rng, dims, harness_settings().aligned_layouts, &inner_gap, &odd_unit);
    if (s == packed_strides(dims)) continue;
    strides[name] = s;
    const bool output = bwd ? name[0] == 'd' && name != "do" : name == "o" || name == "stats";
    (output ? strided_out : strided_in) = true;
  }
  j["strides"] = strides;
  // The vectors too (issue 11 item 4: an engine that reads them packed must fail here).
  json vector_strides = json::object();
  std::vector<std::string> vectors;
  if (j["sink"].get<bool>()) vectors.push_back("sink");
  if (j["sink"].get<bool>() && bwd) vectors.push_back("dsink");
  if (!j["seq_len_q"].is_null()) vectors.push_back("seq_len_q");
  if (!j["seq_len_kv"].is_null()) vectors.push_back("seq_len_kv");
  for (const std::string& name : vectors) {
    if (rng.chance(0.4)) continue;  // packed
    const int64_t n =
        name == "sink" || name == "dsink" ? j["h_q"].get<int64_t>() : j["b"].get<int64_t>();
    vector_strides[name] = n == 1 ? rng.pick(std::vector<int64_t>{0, 3, 1001})
                                  : rng.pick(std::vector<int64_t>{2, 3, 5, 17, 1000});
    const bool output = name == "dsink";
    (output ? strided_out : strided_in) = true;
    add(features, "strided " + name);
  }
  if (!vector_strides.empty()) j[kVectorStridesKey] = vector_strides;
  if (strided_in) add(features, "strided inputs");
  if (strided_out) add(features, "strided outputs");
  if (inner_gap) add(features, "inner stride>1");
  if (odd_unit) add(features, "size-1 dim odd stride");
  return j;
}

namespace {

// Applies the kVectorStridesKey strides of `vs` to the vectors `p` declares.
Status apply_vector_strides(const json& vs, Problem& p) {
  for (const auto& [name, stride] : vs.items()) {
    const TensorId id = tool::tensor_of(name);
    if (!p.has(id)) continue;
    p.set_strides(id, {stride.get<int64_t>()});
    if (!p.setter_error().empty()) return Status(Code::invalid_problem, p.setter_error());
  }
  return Status();
}

}  // namespace

Result<tool::Case> make_case(const json& j_in, uint64_t data_seed) {
  json j = j_in;
  json vector_strides = json::object();
  if (j.contains(kVectorStridesKey)) {
    vector_strides = j[kVectorStridesKey];
    j.erase(kVectorStridesKey);
  }
  Result<Problem> problem = tool::problem_from_json(j);
  if (!problem) return problem.status();
  if (Status st = apply_vector_strides(vector_strides, *problem); !st) return st;
  tool::Case c;
  c.json = j;
  c.problem = *problem;
  Rng rng(data_seed);
  const Problem& p = c.problem;
  auto dims = [&](TensorId id) {
    const TensorDesc& d = *p.tensor(id);
    return std::vector<int64_t>(d.dims.begin(), d.dims.begin() + d.rank);
  };
  // q and k share an amplitude drawn per case, so that some cases have flat and some peaked
  // softmax rows; magnitudes never reach zero, so no element can pass by being 0.
  const double qk_amp = rng.pick(std::vector<double>{0.5, 1.0, 1.0, 2.0, 3.0});
  c.inputs["q"] = random_array(rng, dims(TensorId::q), 0.05 * qk_amp, qk_amp);
  c.inputs["k"] = random_array(rng, dims(TensorId::k), 0.05 * qk_amp, qk_amp);
  c.inputs["v"] = random_array(rng, dims(TensorId::v), 0.05, 1.0);
  if (p.has(TensorId::bias)) c.inputs["bias"] = random_array(rng, dims(TensorId::bias), 0.05, 2.0);
  if (p.has(TensorId::sink)) {
    tool::HostArray sink = random_array(rng, dims(TensorId::sink), 0.1, 3.0);
    for (float& x : sink.data) x += 1.0f;  // about the size of a row's log-sum-exp
    c.inputs["sink"] = sink;
  }
  for (const char* name : {"seq_len_q", "seq_len_kv"}) {
    if (!j.contains(name) || j[name].is_null()) continue;
    tool::HostArray lens;
    lens.shape = {static_cast<int64_t>(j[name].size())};
    for (const json& v : j[name]) lens.data.push_back(static_cast<float>(v.get<int64_t>()));
    c.inputs[name] = lens;
  }
  if (p.direction() == Direction::backward) {
    // o and stats as the forward really produces them from these inputs, so that the
    // backward sees a consistent problem: the reference forward, with stats.
    json fj = j;
    fj["op"] = kOpForward;
    fj["stats"] = true;
    json fs = json::object();
    const auto strides = j.find("strides");  // const json: operator[] would not check
    for (const char* n : {"q", "k", "v", "o", "stats", "bias"}) {
      if (strides != j.end() && strides->is_object() && strides->contains(n)) fs[n] = (*strides)[n];
    }
    fj["strides"] = fs;
    Result<Problem> fp = tool::problem_from_json(fj);
    if (!fp)
      return Status(fp.status().code(), "the forward of a backward case: " + fp.status().message());
    if (Status st = apply_vector_strides(vector_strides, *fp); !st) return st;
    tool::Case fc;
    fc.json = fj;
    fc.problem = *fp;
    fc.inputs = c.inputs;
    Result<tool::ArrayMap> out = run_reference(fc);
    if (!out) {
      return Status(out.status().code(),
                    "reference forward for the backward's o and stats: " + out.status().message());
    }
    c.inputs["o"] = (*out)["o"];
    c.inputs["stats"] = (*out)["stats"];
    c.inputs["do"] = random_array(rng, dims(TensorId::d_o), 0.05, 1.0);
  }
  return c;
}

Result<GeneratedCase> generate_case(uint64_t seed, Direction direction,
                                    const GeneratorLimits& limits) {
  GeneratedCase g;
  g.seed = seed;
  Rng rng(seed);
  // FLOE_FEATURES: drawn again from the same generator until the case has what is asked for.
  const std::vector<std::string>& wanted = harness_settings().features;
  auto fits = [&](const std::vector<std::string>& have) {
    for (const std::string& w : wanted) {
      const bool unwanted = w[0] == '-';
      const std::string name = unwanted ? w.substr(1) : w;
      const bool has = std::find(have.begin(), have.end(), name) != have.end();
      if (has == unwanted) return false;
    }
    return true;
  };
  json j;
  for (int draw = 0;; ++draw) {
    g.features.clear();
    j = random_problem_json(rng, direction, limits, &g.features);
    if (fits(g.features)) break;
    if (draw == 100000) {
      return Status(Code::invalid_argument,
                    "FLOE_FEATURES: no case in 100000 draws has the features asked for");
    }
  }
  Result<tool::Case> c = make_case(j, mix64(seed ^ 0xDA7ADA7Aull));
  if (!c) return c.status();
  g.c = std::move(*c);
  if (!harness_settings().bias_grad && g.c.problem.has(TensorId::dbias)) {
    g.c.problem.set_bias_grad(false);
    g.features.push_back("bias without dbias");
  }
  return g;
}

std::string describe(const json& j) {
  std::ostringstream o;
  o << j.value("op", "?") << " " << j.value("dtype", "?") << " b" << j.value("b", 0) << " hq"
    << j.value("h_q", 0) << "/hkv" << j.value("h_kv", 0) << " sq" << j.value("s_q", 0) << " skv"
    << j.value("s_kv", 0) << " d" << j.value("d_qk", 0) << "/" << j.value("d_v", 0);
  if (j.contains("mask") && j["mask"].is_object()) {
    const json& m = j["mask"];
    o << " mask(" << (m.value("align", "top_left") == "bottom_right" ? "br" : "tl") << ","
      << (m.contains("left") && !m["left"].is_null() ? m["left"].dump() : "-") << ","
      << (m.contains("right") && !m["right"].is_null() ? m["right"].dump() : "-") << ")";
  }
  if (j.contains("bias") && !j["bias"].is_null()) o << " bias" << j["bias"].dump();
  if (is_true(j, "sink")) o << " sink";
  if (j.contains("softcap") && !j["softcap"].is_null())
    o << " softcap=" << j["softcap"].get<double>();
  if (j.contains("scale") && !j["scale"].is_null()) o << " scale=" << j["scale"].get<double>();
  if (j.contains("seq_len_q") && !j["seq_len_q"].is_null()) o << " lens_q" << j["seq_len_q"].dump();
  if (j.contains("seq_len_kv") && !j["seq_len_kv"].is_null())
    o << " lens_kv" << j["seq_len_kv"].dump();
  if (j.value("op", "") == kOpForward && is_true(j, "stats")) o << " stats";
  if (is_true(j, "deterministic")) o << " deterministic";
  bool first = true;
  for (const char* key : {"strides", kVectorStridesKey}) {
    if (!j.contains(key) || j[key].empty()) continue;
    for (const auto& [name, _] : j[key].items()) {
      o << (first ? " strided(" : ",") << name;
      first = false;
    }
  }
  if (!first) o << ")";
  return o.str();
}

}  // namespace floe::test
