// Non-finite inputs on the reference engine (DESIGN §2, issue 11 item 1): NaN, +inf and -inf
// planted one at a time in q, k, v, bias, sink, and for the backward in do, o and stats. Each
// output element's class (finite, NaN, +inf, -inf) is held to a model written here from the rule,
// not from the engine: a NaN a row can see makes its O and stats NaN, a score of +inf does too
// (exp(inf - inf)), a score of -inf weighs 0, a non-finite V element reaches the O column of the
// rows that see its key, and a gradient is NaN exactly when a NaN term feeds it. Rows and keys a
// row cannot see (mask, padding) never carry a NaN anywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "support/reference_harness.h"

namespace floe::reftest {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Cls { finite, nan, pos_inf, neg_inf };

Cls cls(double x) {
  if (std::isnan(x)) return Cls::nan;
  if (x == kInf) return Cls::pos_inf;
  if (x == -kInf) return Cls::neg_inf;
  return Cls::finite;
}
const char* name(Cls c) {
  switch (c) {
    case Cls::finite:
      return "finite";
    case Cls::nan:
      return "NaN";
    case Cls::pos_inf:
      return "+inf";
    case Cls::neg_inf:
      return "-inf";
  }
  return "?";
}

// B 2, Hq 2 over one kv head, Sq 5, Skv 6, causal (row i sees keys j <= i), a full bias, a sink;
// batch 1 has 3 query rows and 4 keys. Key 5 is seen by no row; in batch 1, rows 3-4 and keys
// 4-5 are padding.
Case base_case() {
  Case c;
  c.name = "nonfinite";
  c.spec.b = 2, c.spec.h_q = 2, c.spec.h_kv = 1, c.spec.s_q = 5, c.spec.s_kv = 6;
  c.spec.d_qk = 8, c.spec.d_v = 8;
  c.spec.right = 0;
  c.spec.bias_b = 2, c.spec.bias_h = 2;
  c.spec.sink = true;
  c.spec.seq_q = {5, 3};
  c.spec.seq_kv = {6, 4};
  c.seed = 11;
  return c;
}

struct Geometry {
  Spec s;
  int64_t sq(int64_t b) const { return s.seq_q[b]; }
  int64_t skv(int64_t b) const { return s.seq_kv[b]; }
  bool visible(int64_t b, int64_t i, int64_t j) const { return i < sq(b) && j < skv(b) && j <= i; }
  size_t row(int64_t b, int64_t h, int64_t i) const { return (b * s.h_q + h) * s.s_q + i; }
  size_t krow(int64_t b, int64_t j) const { return b * s.s_kv + j; }  // one kv head
};

// Forward model: the class of every O element and stats entry, from the classes of the scores
// (computed here in fp64 from the inputs the engine saw) and of V and the sink.
void forward_model(const Geometry& g, const Tensors& in, std::vector<Cls>* o,
                   std::vector<Cls>* lse) {
  const Spec& s = g.s;
  o->assign(s.b * s.h_q * s.s_q * s.d_v, Cls::finite);
  lse->assign(s.b * s.h_q * s.s_q, Cls::finite);
  for (int64_t b = 0; b < s.b; ++b) {
    for (int64_t h = 0; h < s.h_q; ++h) {
      for (int64_t i = 0; i < s.s_q; ++i) {
        const size_t r = g.row(b, h, i);
        if (i >= g.sq(b)) {  // padding: O = 0, stats = -inf
          (*lse)[r] = Cls::neg_inf;
          continue;
        }
        const Cls sink = s.sink ? cls(in.sink[h]) : Cls::neg_inf;
        bool poisoned = sink == Cls::nan || sink == Cls::pos_inf;
        bool weighs = sink != Cls::neg_inf;
        for (int64_t j = 0; j < s.s_kv; ++j) {
          if (!g.visible(b, i, j)) continue;
          double dot = 0;
          for (int64_t d = 0; d < s.d_qk; ++d) {
            dot += in.q[r * s.d_qk + d] * in.k[g.krow(b, j) * s.d_qk + d];
          }
          const double score =
              s.resolved_scale() * dot + in.bias[((b * s.h_q + h) * s.s_q + i) * s.s_kv + j];
          const Cls c = cls(score);
          poisoned |= c == Cls::nan || c == Cls::pos_inf;
          weighs |= c != Cls::neg_inf;
        }
        if (poisoned) {
          (*lse)[r] = Cls::nan;
          for (int64_t d = 0; d < s.d_v; ++d) (*o)[r * s.d_v + d] = Cls::nan;
          continue;
        }
        if (!weighs) {  // every score -inf, no sink: a row with no visible key
          (*lse)[r] = Cls::neg_inf;
          continue;
        }
        for (int64_t d = 0; d < s.d_v; ++d) {
          Cls c = Cls::finite;
          for (int64_t j = 0; j < s.s_kv; ++j) {
            if (!g.visible(b, i, j)) continue;
            const Cls v = cls(in.v[g.krow(b, j) * s.d_v + d]);
            if (v == Cls::nan || (v != Cls::finite && c != Cls::finite && c != v)) {
              c = Cls::nan;
            } else if (v != Cls::finite && c != Cls::nan) {
              c = v;  // p > 0 (random finite scores) times +-inf
            }
          }
          (*o)[r * s.d_v + d] = c;
        }
      }
    }
  }
}

// Backward model for one NaN planted in q, k, v, bias, sink, do, o or stats (o and stats come
// from the clean forward, so they are finite or -inf): which gradient elements are NaN.
struct BackwardNaN {
  std::vector<bool> dq, dk, dv, dbias, dsink;
};

BackwardNaN backward_model(const Geometry& g, const Tensors& in) {
  const Spec& s = g.s;
  auto nan_in = [](const std::vector<double>& t, size_t from, int64_t n) {
    for (int64_t d = 0; d < n; ++d) {
      if (std::isnan(t[from + d])) return true;
    }
    return false;
  };
  BackwardNaN m;
  m.dq.assign(s.b * s.h_q * s.s_q * s.d_qk, false);
  m.dk.assign(s.b * s.s_kv * s.d_qk, false);
  m.dv.assign(s.b * s.s_kv * s.d_v, false);
  m.dbias.assign(s.b * s.h_q * s.s_q * s.s_kv, false);
  m.dsink.assign(s.h_q, false);
  for (int64_t b = 0; b < s.b; ++b) {
    for (int64_t h = 0; h < s.h_q; ++h) {
      if (std::isnan(in.sink[h])) m.dsink[h] = true;
      for (int64_t i = 0; i < g.sq(b); ++i) {
        const size_t r = g.row(b, h, i);
        const bool q_nan = nan_in(in.q, r * s.d_qk, s.d_qk);
        const bool lse_nan = std::isnan(in.lse[r]);
        const bool delta_nan = nan_in(in.d_o, r * s.d_v, s.d_v) || nan_in(in.o, r * s.d_v, s.d_v);
        if (in.lse[r] != -kInf && (lse_nan || delta_nan)) m.dsink[h] = true;
        for (int64_t j = 0; j < s.s_kv; ++j) {
          if (!g.visible(b, i, j)) continue;
          const size_t kr = g.krow(b, j);
          const size_t bi = ((b * s.h_q + h) * s.s_q + i) * s.s_kv + j;
          const bool s_nan = q_nan || nan_in(in.k, kr * s.d_qk, s.d_qk) || std::isnan(in.bias[bi]);
          const bool p_nan = s_nan || lse_nan;
          bool dp_nan = false;
          for (int64_t d = 0; d < s.d_v; ++d) {
            dp_nan |= std::isnan(in.d_o[r * s.d_v + d]) || std::isnan(in.v[kr * s.d_v + d]);
          }
          const bool ds_nan = p_nan || dp_nan || delta_nan;
          if (ds_nan) {
            for (int64_t d = 0; d < s.d_qk; ++d) {
              m.dq[r * s.d_qk + d] = true;
              m.dk[kr * s.d_qk + d] = true;
            }
            m.dbias[bi] = true;
          }
          for (int64_t d = 0; d < s.d_v; ++d) {
            if (p_nan || std::isnan(in.d_o[r * s.d_v + d])) m.dv[kr * s.d_v + d] = true;
          }
        }
      }
    }
  }
  return m;
}

std::string diff_classes(const char* what, const std::vector<double>& got,
                         const std::vector<Cls>& want) {
  std::string out;
  int shown = 0;
  if (got.size() != want.size()) return std::string(what) + ": size differs\n";
  for (size_t e = 0; e < got.size(); ++e) {
    if (cls(got[e]) == want[e]) continue;
    if (shown++ < 6) {
      out += std::string(what) + "[" + std::to_string(e) + "] = " + std::to_string(got[e]) +
             ", the rule says " + name(want[e]) + "\n";
    }
  }
  if (shown > 6) out += std::string(what) + ": " + std::to_string(shown) + " differ in all\n";
  return out;
}

std::string diff_nan(const char* what, const std::vector<double>& got,
                     const std::vector<bool>& want) {
  std::vector<Cls> w(want.size());
  std::vector<double> g(got.size());
  for (size_t e = 0; e < want.size(); ++e) w[e] = want[e] ? Cls::nan : Cls::finite;
  // Only NaN-ness is modelled for gradients; a finite gradient must be finite.
  for (size_t e = 0; e < got.size(); ++e) g[e] = got[e];
  return diff_classes(what, g, w);
}

struct Plant {
  std::string tensor;
  size_t index;
  double value;
};

std::vector<double>& slot(Tensors& t, const std::string& name) {
  if (name == "q") return t.q;
  if (name == "k") return t.k;
  if (name == "v") return t.v;
  if (name == "bias") return t.bias;
  if (name == "sink") return t.sink;
  if (name == "do") return t.d_o;
  if (name == "o") return t.o;
  return t.lse;
}

// Places worth a plant: a seen row or key, one seen by no row (key 5), padding (batch 1's row 4
// and key 5), and for the bias a masked pair.
std::vector<Plant> plants(const Spec& s, bool backward) {
  const size_t q_row = ((1 * s.h_q + 1) * s.s_q + 2) * s.d_qk;  // b1 h1 i2
  const size_t q_pad = ((1 * s.h_q + 0) * s.s_q + 4) * s.d_qk;  // b1 i4: padding
  const size_t k_seen = (0 * s.s_kv + 3) * s.d_qk;              // b0 j3: rows 3-4 see it
  const size_t k_none = (0 * s.s_kv + 5) * s.d_qk;              // b0 j5: no row sees it
  const size_t k_pad = (1 * s.s_kv + 5) * s.d_qk;               // b1 j5: padding
  const size_t o_row = ((0 * s.h_q + 1) * s.s_q + 1) * s.d_v;   // b0 h1 i1
  auto bias_at = [&](int64_t b, int64_t h, int64_t i, int64_t j) {
    return static_cast<size_t>(((b * s.h_q + h) * s.s_q + i) * s.s_kv + j);
  };
  std::vector<Plant> out;
  for (double x : {kNaN, kInf, -kInf}) {
    for (size_t e : {q_row, q_row + 3, q_pad}) out.push_back({"q", e, x});
    out.push_back({"q", 0, x});  // b0 h0 i0: sees key 0 only, so every score it has is hit
    for (size_t e : {k_seen, k_seen + 5, k_none, k_pad}) out.push_back({"k", e, x});
    for (size_t e :
         {k_seen / s.d_qk * s.d_v + 2, k_none / s.d_qk * s.d_v, k_pad / s.d_qk * s.d_v}) {
      out.push_back({"v", e, x});
    }
    for (size_t e :
         {bias_at(0, 1, 3, 2), bias_at(1, 0, 2, 0), bias_at(0, 0, 1, 3), bias_at(1, 1, 4, 0)}) {
      out.push_back({"bias", e, x});  // seen, seen, masked (j > i), padding row
    }
    out.push_back({"sink", 1, x});
    if (backward) {
      for (size_t e : {o_row + 4, q_pad / s.d_qk * s.d_v}) {
        out.push_back({"do", e, x});
        out.push_back({"o", e, x});
      }
      out.push_back({"stats", static_cast<size_t>((0 * s.h_q + 1) * s.s_q + 2), x});
      out.push_back({"stats", static_cast<size_t>((1 * s.h_q + 0) * s.s_q + 4), x});  // padding
    }
  }
  return out;
}

std::string describe(const Plant& p) {
  return p.tensor + "[" + std::to_string(p.index) + "] = " + std::to_string(p.value);
}

// With a sink and without: a finite sink kept the old engine's row max finite, which hid the
// NaN-dropping max; without one, a row whose scores were all NaN came out as O = 0, stats -inf.
TEST(ReferenceNonFinite, ForwardFollowsTheRule) {
  int checked = 0;
  for (bool sink : {true, false}) {
    Case c = base_case();
    c.spec.sink = sink;
    const Geometry g{c.spec};
    const Tensors clean = random_inputs(c, Direction::forward);
    for (const Plant& p : plants(c.spec, false)) {
      if (p.tensor == "sink" && !sink) continue;
      SCOPED_TRACE(describe(p) + (sink ? " (sink)" : " (no sink)"));
      Tensors in = clean;
      slot(in, p.tensor)[p.index] = p.value;
      const EngineRun run = run_engine(c, Direction::forward, in);
      ASSERT_TRUE(run.status.ok()) << run.status.message();
      for (const std::string& d : run.damage) ADD_FAILURE() << d;
      std::vector<Cls> o, lse;
      forward_model(g, run.in, &o, &lse);
      EXPECT_EQ(diff_classes("o", run.out.o, o) + diff_classes("stats", run.out.lse, lse), "");
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3 * 16 + 3 * 15);
}

// The rule's corners by value: NaN q row -> that row's O and stats NaN (it was O = 0 and
// stats = -inf); NaN sink -> NaN for every row of the head, even one with no visible key.
TEST(ReferenceNonFinite, NaNRowsAreNaNNotEmpty) {
  Case c = base_case();
  c.spec.sink = false;  // a finite sink would have kept the old max finite
  const Spec& s = c.spec;
  Tensors in = random_inputs(c, Direction::forward);
  for (int64_t d = 0; d < s.d_qk; ++d) in.q[d] = kNaN;  // b0 h0 i0: sees key 0 only
  EngineRun run = run_engine(c, Direction::forward, in);
  ASSERT_TRUE(run.status.ok()) << run.status.message();
  EXPECT_TRUE(std::isnan(run.out.lse[0]));
  for (int64_t d = 0; d < s.d_v; ++d) EXPECT_TRUE(std::isnan(run.out.o[d])) << d;
  EXPECT_TRUE(std::isfinite(run.out.lse[1]));

  c.spec.right = -2;  // rows 0 and 1 see no key
  c.spec.sink = true;
  in = random_inputs(c, Direction::forward);
  in.sink[0] = kNaN;
  run = run_engine(c, Direction::forward, in);
  ASSERT_TRUE(run.status.ok()) << run.status.message();
  EXPECT_TRUE(std::isnan(run.out.lse[0])) << "no key, NaN sink: stats = sigma = NaN";
  EXPECT_TRUE(std::isnan(run.out.o[0])) << "O = 0 / NaN";
  EXPECT_TRUE(std::isfinite(run.out.lse[s.s_q])) << "head 1's sink is finite";
}

TEST(ReferenceNonFinite, BackwardNaNReachesExactlyWhatDependsOnIt) {
  const Case c = base_case();
  const Geometry g{c.spec};
  Tensors clean = random_inputs(c, Direction::backward);
  {
    Tensors fwd = clean;
    naive_forward(c.spec, fwd);
    clean.o = fwd.o;
    clean.lse = fwd.lse;
  }
  int checked = 0;
  for (const Plant& p : plants(c.spec, true)) {
    if (!std::isnan(p.value)) continue;
    SCOPED_TRACE(describe(p));
    Tensors in = clean;
    slot(in, p.tensor)[p.index] = p.value;
    const EngineRun run = run_engine(c, Direction::backward, in);
    ASSERT_TRUE(run.status.ok()) << run.status.message();
    for (const std::string& d : run.damage) ADD_FAILURE() << d;
    const BackwardNaN m = backward_model(g, run.in);
    EXPECT_EQ(diff_nan("dq", run.out.dq, m.dq) + diff_nan("dk", run.out.dk, m.dk) +
                  diff_nan("dv", run.out.dv, m.dv) + diff_nan("dbias", run.out.dbias, m.dbias) +
                  diff_nan("dsink", run.out.dsink, m.dsink),
              "");
    ++checked;
  }
  EXPECT_EQ(checked, 16 + 6);
}

// An infinity may become +-inf or NaN depending on signs, so its class is not modelled; but it
// may only reach what a NaN in its place reaches (nothing a row cannot see, no padding), and a
// +inf in a seen q, k or bias element must reach something.
TEST(ReferenceNonFinite, BackwardInfinityStaysWithinItsDependencies) {
  const Case c = base_case();
  const Geometry g{c.spec};
  Tensors clean = random_inputs(c, Direction::backward);
  {
    Tensors fwd = clean;
    naive_forward(c.spec, fwd);
    clean.o = fwd.o;
    clean.lse = fwd.lse;
  }
  int checked = 0, reached = 0;
  for (const Plant& p : plants(c.spec, true)) {
    if (std::isnan(p.value) || p.tensor == "stats") continue;  // stats: the test below
    SCOPED_TRACE(describe(p));
    Tensors in = clean;
    slot(in, p.tensor)[p.index] = p.value;
    const EngineRun run = run_engine(c, Direction::backward, in);
    ASSERT_TRUE(run.status.ok()) << run.status.message();
    Tensors as_nan = run.in;
    slot(as_nan, p.tensor)[p.index] = kNaN;
    const BackwardNaN m = backward_model(g, as_nan);
    int nonfinite = 0;
    auto within = [&](const char* what, const std::vector<double>& got,
                      const std::vector<bool>& may) {
      for (size_t e = 0; e < got.size(); ++e) {
        if (std::isfinite(got[e])) continue;
        ++nonfinite;
        EXPECT_TRUE(may[e]) << what << "[" << e << "] = " << got[e]
                            << " does not depend on the planted element";
      }
    };
    within("dq", run.out.dq, m.dq);
    within("dk", run.out.dk, m.dk);
    within("dv", run.out.dv, m.dv);
    within("dbias", run.out.dbias, m.dbias);
    within("dsink", run.out.dsink, m.dsink);
    reached += nonfinite > 0;
    ++checked;
  }
  EXPECT_EQ(checked, 2 * 20);
  EXPECT_GT(reached, 10) << "infinities in seen elements must show somewhere";
}

// Stats of -inf mark a row without weight (what the forward writes for a row with no visible
// key): its pairs get P = 0, as on the GPU engines, not exp(s + inf) = inf. Stats of +inf give
// P = 0 by arithmetic. Either way every gradient stays finite.
TEST(ReferenceNonFinite, BackwardInfiniteStatsWeighNothing) {
  const Case c = base_case();
  const Spec& s = c.spec;
  Tensors clean = random_inputs(c, Direction::backward);
  {
    Tensors fwd = clean;
    naive_forward(c.spec, fwd);
    clean.o = fwd.o;
    clean.lse = fwd.lse;
  }
  for (double x : {-kInf, kInf}) {
    SCOPED_TRACE(x);
    Tensors in = clean;
    const size_t r = (0 * s.h_q + 1) * s.s_q + 2;  // b0 h1 i2
    in.lse[r] = x;
    const EngineRun run = run_engine(c, Direction::backward, in);
    ASSERT_TRUE(run.status.ok()) << run.status.message();
    for (const auto* t : {&run.out.dq, &run.out.dk, &run.out.dv, &run.out.dbias, &run.out.dsink}) {
      for (double e : *t) ASSERT_TRUE(std::isfinite(e));
    }
    for (int64_t d = 0; d < s.d_qk; ++d) EXPECT_EQ(run.out.dq[r * s.d_qk + d], 0.0);
  }
}

}  // namespace
}  // namespace floe::reftest
