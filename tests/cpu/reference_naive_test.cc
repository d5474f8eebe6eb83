// The reference engine against the independent naive formulation (tests/support/
// reference_naive.cc), forward and backward, to within one ulp of the output dtype: a named
// table that walks every axis of DESIGN §2, then a seeded random battery over their
// combinations.
#include <gtest/gtest.h>

#include <random>

#include "support/harness_random_problem.h"
#include "support/reference_harness.h"

namespace floe::reftest {
namespace {

const std::vector<TensorId> kFourD = {TensorId::q,   TensorId::k,  TensorId::v,  TensorId::o,
                                      TensorId::d_o, TensorId::dq, TensorId::dk, TensorId::dv};

Spec base(int64_t b = 2, int64_t h_q = 2, int64_t h_kv = 2, int64_t s_q = 7, int64_t s_kv = 9,
          int64_t d_qk = 16, int64_t d_v = 16) {
  Spec s;
  s.b = b, s.h_q = h_q, s.h_kv = h_kv, s.s_q = s_q, s.s_kv = s_kv, s.d_qk = d_qk, s.d_v = d_v;
  return s;
}

Spec band(Spec s, std::optional<int64_t> left, std::optional<int64_t> right, bool br) {
  s.left = left;
  s.right = right;
  s.bottom_right = br;
  return s;
}

Case make(const std::string& name, const Spec& spec, DType dtype = DType::bf16) {
  Case c;
  c.name = name;
  c.spec = spec;
  c.dtype = dtype;
  c.seed = std::hash<std::string>{}(name);
  return c;
}

Case with_layout(Case c, const Layout& layout, const std::vector<TensorId>& ids = kFourD) {
  for (TensorId id : ids) c.layouts[id] = layout;
  return c;
}

std::vector<Case> named_cases() {
  std::vector<Case> v;
  auto add = [&](Case c) { v.push_back(std::move(c)); };
  // Shapes and head grouping.
  add(make("plain", base()));
  add(make("plain_f16", base(), DType::f16));
  add(make("gqa2", base(2, 4, 2)));
  add(make("gqa8", base(1, 16, 2, 5, 6, 8, 8)));
  add(make("mqa", base(2, 3, 1)));
  add(make("sq1", base(2, 4, 2, 1, 13)));
  add(make("skv1", base(2, 2, 1, 6, 1)));
  add(make("sq1_skv1", base(3, 2, 2, 1, 1)));
  add(make("dqk_ne_dv", base(2, 2, 1, 5, 8, 24, 8)));
  add(make("d1", base(2, 2, 2, 5, 6, 1, 1)));
  add(make("long_row", base(1, 1, 1, 3, 257, 8, 8)));
  // The band, both alignments, Sq < Skv and Sq > Skv.
  add(make("causal_tl", band(base(2, 2, 1, 9, 6), std::nullopt, 0, false)));
  add(make("causal_br", band(base(2, 2, 1, 6, 11), std::nullopt, 0, true)));
  add(make("causal_br_sq_gt_skv", band(base(2, 2, 1, 11, 6), std::nullopt, 0, true)));
  add(make("window_tl", band(base(), 3, 0, false)));
  add(make("window_br", band(base(2, 2, 2, 6, 12), 2, 1, true)));
  add(make("right_only", band(base(), std::nullopt, 2, false)));
  add(make("left_only_br", band(base(), 1, std::nullopt, true)));
  add(make("right_negative", band(base(2, 2, 2, 8, 8), std::nullopt, -3, false)));
  add(make("band_off_diagonal", band(base(2, 2, 2, 8, 8), -2, 4, false)));
  add(make("band_empty", band(base(2, 2, 2, 5, 5), -3, -1, false)));  // left < -right: no key
  // Padding, zero lengths included; bottom-right uses the actual lengths.
  Spec pad = base(3, 2, 1, 7, 9);
  pad.seq_q = {7, 0, 3};
  pad.seq_kv = {9, 4, 0};
  add(make("padding", pad));
  add(make("padding_causal_br", band(pad, std::nullopt, 0, true)));
  add(make("padding_window_tl", band(pad, 2, 1, false)));
  Spec pad_q = base(2, 2, 2, 6, 6);
  pad_q.seq_q = {2, 6};
  add(make("padding_q_only", pad_q));
  Spec pad_kv = base(2, 2, 2, 6, 6);
  pad_kv.seq_kv = {1, 5};
  add(make("padding_kv_only_br", band(pad_kv, 1, 0, true)));
  // Bias, each broadcast.
  for (auto [bb, bh] : {std::pair<int, int>{1, 1}, {2, 1}, {1, 4}, {2, 4}}) {
    Spec s = base(2, 4, 2);
    s.bias_b = bb, s.bias_h = bh;
    add(make("bias_" + std::to_string(bb) + "_" + std::to_string(bh), s));
  }
  // Sink, with fully masked and padded rows.
  Spec sink = base(2, 4, 2);
  sink.sink = true;
  add(make("sink", sink));
  add(make("sink_masked_rows", band(sink, std::nullopt, -3, false)));
  Spec sink_pad = pad;
  sink_pad.sink = true;
  add(make("sink_padding", band(sink_pad, std::nullopt, 0, true)));
  // Softcap and scale.
  Spec cap = base();
  cap.softcap = 2.0;
  cap.scale = 0.6;
  add(make("softcap", cap));
  Spec cap_bias = cap;
  cap_bias.bias_b = 2, cap_bias.bias_h = 1;
  add(make("softcap_bias", cap_bias, DType::f16));
  Spec scaled = base();
  scaled.scale = 0.05;
  add(make("scale", scaled));
  // Layouts: permuted, gaps, non-unit innermost strides, zero strides on inputs.
  add(with_layout(make("bshd", base(2, 4, 2)), Layout::bshd()));
  add(with_layout(make("gaps", base(2, 4, 2)), Layout::gaps(3)));
  add(with_layout(make("inner_stride", base(2, 2, 1)), Layout::stepped(3)));
  add(with_layout(make("d_outermost", base(2, 2, 1)), Layout::permuted({3, 1, 0, 2}, 2, 2)));
  Case k_shared = make("k_zero_stride_batch", base(2, 2, 1));
  k_shared.layouts[TensorId::k] = Layout::broadcast(0);
  k_shared.layouts[TensorId::d_o] = Layout::broadcast(2);  // one dO row for every query
  add(k_shared);
  Spec bias_s = base(2, 4, 2);
  bias_s.bias_b = 2, bias_s.bias_h = 4, bias_s.sink = true;
  Case bias_layout = make("bias_stats_layouts", bias_s);
  bias_layout.layouts[TensorId::bias] = Layout::permuted({3, 2, 1, 0}, 1);
  bias_layout.layouts[TensorId::dbias] = Layout::permuted({1, 3, 0, 2}, 2, 2);
  bias_layout.layouts[TensorId::stats] = Layout::permuted({2, 0, 1}, 1, 2);
  bias_layout.layouts[TensorId::sink] = Layout::stepped(3);
  bias_layout.layouts[TensorId::dsink] = Layout::stepped(2);
  add(bias_layout);
  Case bias_row = make("bias_zero_stride_row", bias_s);
  bias_row.layouts[TensorId::bias] = Layout::broadcast(2);  // one bias row for every query
  add(bias_row);
  Case pad_layout = make("seq_len_strided", pad);
  pad_layout.layouts[TensorId::seq_len_q] = Layout::stepped(2);
  pad_layout.layouts[TensorId::seq_len_kv] = Layout::gaps(0);
  add(pad_layout);
  // Forward without stats; backward without dbias; stats given off the true LSE.
  Case no_stats = make("no_stats", base());
  no_stats.stats = false;
  add(no_stats);
  Spec nograd = base(2, 4, 2);
  nograd.bias_b = 1, nograd.bias_h = 4;
  Case no_dbias = make("bias_without_grad", nograd);
  no_dbias.bias_grad = false;
  add(no_dbias);
  Case shifted = make("stats_as_given", sink);
  shifted.lse_shift = 0.75;
  add(shifted);
  // Everything at once.
  Spec all = band(base(3, 4, 2, 9, 12, 16, 8), 4, 1, true);
  all.seq_q = {9, 2, 0};
  all.seq_kv = {12, 3, 7};
  all.bias_b = 3, all.bias_h = 1, all.sink = true, all.softcap = 3.0;
  Case everything =
      with_layout(make("everything", all, DType::f16), Layout::permuted({2, 0, 1, 3}, 1));
  everything.threads = 3;
  add(everything);
  return v;
}

class NamedCase : public ::testing::TestWithParam<Case> {};

TEST_P(NamedCase, ForwardMatchesNaive) {
  EXPECT_EQ(check_against_naive(GetParam(), Direction::forward), "");
}
TEST_P(NamedCase, BackwardMatchesNaive) {
  EXPECT_EQ(check_against_naive(GetParam(), Direction::backward), "");
}

INSTANTIATE_TEST_SUITE_P(Reference, NamedCase, ::testing::ValuesIn(named_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// A random problem over every axis at once: small, so that hundreds run in a second or two.
Case random_case(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto coin = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  Spec s;
  s.b = pick(1, 3);
  s.h_kv = pick(1, 2);
  const int64_t groups[] = {1, 2, 3, 4, 8};
  s.h_q = s.h_kv * groups[pick(0, 4)];
  s.s_q = pick(1, 12);
  s.s_kv = pick(1, 12);
  const int64_t dims[] = {1, 4, 8, 16, 24};
  s.d_qk = dims[pick(0, 4)];
  s.d_v = dims[pick(0, 4)];
  if (coin(0.6)) {
    if (coin(0.7)) s.left = pick(-3, 8);
    if (coin(0.7)) s.right = pick(-3, 8);
    s.bottom_right = coin(0.5);
  }
  if (coin(0.4)) {
    for (int64_t b = 0; b < s.b; ++b) s.seq_q.push_back(static_cast<int>(pick(0, s.s_q)));
  }
  if (coin(0.4)) {
    for (int64_t b = 0; b < s.b; ++b) s.seq_kv.push_back(static_cast<int>(pick(0, s.s_kv)));
  }
  if (coin(0.5)) {
    s.bias_b = coin(0.5) ? 1 : s.b;
    s.bias_h = coin(0.5) ? 1 : s.h_q;
  }
  s.sink = coin(0.4);
  if (coin(0.3)) s.softcap = 1.0 + 9.0 * std::uniform_real_distribution<double>()(rng);
  if (coin(0.3)) s.scale = 0.05 + std::uniform_real_distribution<double>()(rng);

  Case c = make("random_" + std::to_string(seed), s, coin(0.5) ? DType::bf16 : DType::f16);
  c.seed = seed;
  c.threads = static_cast<int>(pick(1, 4));
  c.stats = coin(0.8);
  c.bias_grad = coin(0.8);
  for (int i = 0; i < kTensorCount; ++i) {
    const auto id = static_cast<TensorId>(i);
    const bool four_d = id != TensorId::stats && id != TensorId::sink && id != TensorId::dsink &&
                        id != TensorId::seq_len_q && id != TensorId::seq_len_kv;
    const bool input = id != TensorId::o && id != TensorId::stats && id != TensorId::dq &&
                       id != TensorId::dk && id != TensorId::dv && id != TensorId::dbias &&
                       id != TensorId::dsink;
    switch (pick(0, 5)) {
      case 0:
        break;  // packed
      case 1:
        c.layouts[id] = Layout::gaps(pick(1, 3));
        break;
      case 2:
        c.layouts[id] = Layout::stepped(pick(2, 3));
        break;
      case 3:
        if (four_d) {
          std::vector<int> order = {0, 1, 2, 3};
          std::shuffle(order.begin(), order.end(), rng);
          c.layouts[id] = Layout::permuted(order, pick(0, 2), pick(1, 2));
        }
        break;
      case 4:
        if (four_d) c.layouts[id] = Layout::bshd();
        break;
      case 5:  // a zero stride: only inputs may alias (sink/seq lens would lose their meaning)
        if (input && four_d && id != TensorId::o)
          c.layouts[id] = Layout::broadcast(int(pick(0, 3)));
        break;
    }
  }
  return c;
}

TEST(ReferenceRandom, BatteryMatchesNaive) {
  constexpr int kCases = 300;
  int failures = 0;
  for (uint64_t seed = 1; seed <= kCases && failures < 5; ++seed) {
    const Case c = random_case(seed);
    for (Direction dir : {Direction::forward, Direction::backward}) {
      const std::string err = check_against_naive(c, dir);
      EXPECT_EQ(err, "");
      failures += !err.empty();
    }
  }
}

// The GPU battery's generator (harness_random_problem: random strides on every tensor, the
// vectors included, odd sizes, every mask, padding, bias broadcasts, sinks, softcap, custom and
// negative scales) at CPU sizes: the reference engine against the naive formulation on the same
// problems the GPU battery checks the GPU engines against the reference on. random_case above
// adds what that generator does not make: head dims below 8, zero-stride (broadcast) inputs,
// several reference threads.
TEST(ReferenceRandom, SharedGeneratorMatchesNaive) {
  test::GeneratorLimits limits;
  limits.max_b = 3;
  limits.max_h_q = 6;
  limits.max_s_q = 40;
  limits.max_s_kv = 48;
  limits.max_d = 32;
  limits.max_work = int64_t{1} << 18;
  int failures = 0, checked = 0;
  for (Direction dir : {Direction::forward, Direction::backward}) {
    for (uint64_t seed = 1; seed <= 60 && failures < 5; ++seed) {
      Result<test::GeneratedCase> g = test::generate_case(seed, dir, limits);
      ASSERT_TRUE(g.ok()) << "seed " << seed << ": " << g.status().message();
      Result<ReferenceInputs> r = case_from_generated(g->c, "shared_" + std::to_string(seed));
      ASSERT_TRUE(r.ok()) << r.status().message();
      const EngineRun run = run_engine(r->c, dir, r->inputs);
      ASSERT_TRUE(run.status.ok()) << test::describe(g->c.json) << ": " << run.status.message();
      Tensors naive = run.in;
      if (dir == Direction::forward) {
        naive_forward(r->c.spec, naive);
      } else {
        naive_backward(r->c.spec, naive);
      }
      std::string err;
      for (const std::string& d : run.damage) err += "  " + d + "\n";
      err += compare_outputs(r->c, dir, run.out, naive);
      EXPECT_EQ(err, "") << test::describe(g->c.json);
      failures += !err.empty();
      ++checked;
    }
  }
  EXPECT_EQ(checked, 120);
}

}  // namespace
}  // namespace floe::reftest
