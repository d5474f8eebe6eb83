// floe bench without a GPU: it says so and exits non-zero, its options are listed and checked
// before any device is needed; and what it times is what DESIGN §6 and PEERS.md name, worth
// the FLOPs §6 counts (causal halved, other bands by their exact visible pairs).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "bench_problems.h"
#include "floe/floe.h"
#include "support/cli_process.h"

namespace floe::tool {
namespace {

#ifdef FLOE_CLI
constexpr const char* kCli = FLOE_CLI;
#else
constexpr const char* kCli = nullptr;
#endif

using Ran = test::CliRun;

Ran floe(const std::string& args) {
  return test::run_cli(kCli, args);
}

class BenchCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kCli == nullptr) GTEST_SKIP() << "built without FLOE_CLI (tools off)";
  }
};

TEST_F(BenchCliTest, HelpListsTheOptions) {
  const Ran r = floe("bench --help");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* o :
       {"--sweep",        "--group", "--direction", "--engine",  "--json",      "--warmups",
        "--calls",        "--b",     "--h-q",       "--h-kv",    "--gqa",       "--s-q",
        "--s-kv",         "--d-qk",  "--d-v",       "--causal",  "--dtype",     "--window-left",
        "--window-right", "--bias",  "--sink",      "--softcap", "--stats-gap", "--layout"}) {
    EXPECT_NE(r.out.find(std::string(o) + " "), std::string::npos) << o << "\n" << r.out;
  }
  EXPECT_NE(floe("--help").out.find("bench"), std::string::npos);
}

TEST_F(BenchCliTest, WithoutAGpuItSaysSoAndFails) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  const std::string json =
      (std::filesystem::path(FLOE_BINARY_DIR) / "test_tmp" / "bench_no_gpu.json").string();
  std::filesystem::remove(json);
  const std::vector<std::string> runs = {
      "bench", "bench --sweep quick --direction fwd --json " + json,
      "bench --b 1 --h-q 2 --s-q 128 --d-qk 64 --engine generic"};
  for (const std::string& args : runs) {
    const Ran r = floe(args);
    EXPECT_EQ(r.code, 1) << args << "\n" << r.out;
    EXPECT_EQ(r.out, "floe bench: no CUDA device: floe bench times GPU engines\n") << args;
  }
  EXPECT_FALSE(std::filesystem::exists(json));
}

TEST_F(BenchCliTest, OptionsAreCheckedBeforeTheDevice) {
  const Ran bogus = floe("bench --engine auto bogus");
  EXPECT_EQ(bogus.code, 2) << bogus.out;
  EXPECT_NE(bogus.out.find("--engine bogus: 'bogus' is not an engine (auto, all, "),
            std::string::npos)
      << bogus.out;
  const Ran gqa = floe("bench --h-q 6 --gqa 4");
  EXPECT_EQ(gqa.code, 2) << gqa.out;
  EXPECT_NE(gqa.out.find("--gqa 4: must divide --h-q (6)"), std::string::npos) << gqa.out;
  const Ran invalid = floe("bench --h-q 3 --h-kv 2");
  EXPECT_EQ(invalid.code, 2) << invalid.out;
  EXPECT_NE(invalid.out.find("is invalid: "), std::string::npos) << invalid.out;
  EXPECT_NE(invalid.out.find("h_kv"), std::string::npos) << invalid.out;
  const Ran both = floe("bench --sweep quick --b 2");
  EXPECT_EQ(both.code, 2) << both.out;
  EXPECT_NE(both.out.find("exclude each other"), std::string::npos) << both.out;
  EXPECT_NE(floe("bench --sweep huge").code, 0);
  EXPECT_NE(floe("bench --direction sideways").code, 0);
  EXPECT_NE(floe("bench --dtype f32 --b 1").code, 0);
}

std::vector<BenchProblem> group(const std::string& g) {
  std::vector<BenchProblem> out;
  for (const BenchProblem& bp : standard_problems()) {
    if (bp.group == g) out.push_back(bp);
  }
  return out;
}

TEST(BenchProblems, TheStandardSweepIsDesignSection6) {
  const std::vector<BenchProblem> sweep = group("sweep");
  std::set<std::tuple<int64_t, int64_t, bool>> points;
  for (const BenchProblem& bp : sweep) {
    const Shape& s = bp.shape;
    EXPECT_EQ(bp.dtype, DType::bf16) << bp.name();
    EXPECT_EQ(s.b * s.s_q, 16384) << bp.name();
    EXPECT_EQ(s.h_q * s.d_qk, 2048) << bp.name();
    EXPECT_EQ(s.h_kv, s.h_q) << bp.name();
    EXPECT_EQ(s.s_kv, s.s_q) << bp.name();
    EXPECT_EQ(s.d_v, s.d_qk) << bp.name();
    EXPECT_FALSE(bp.bias || bp.sink || bp.softcap || bp.stats_gap || bp.mask.left) << bp.name();
    EXPECT_EQ(bp.layout, BenchLayout::bhsd) << bp.name();
    if (bp.mask.is_band()) EXPECT_TRUE(bp.causal()) << bp.name();
    points.insert({s.d_qk, s.s_q, bp.causal()});
  }
  EXPECT_EQ(sweep.size(), 36u);
  for (int64_t d : {64, 128, 256}) {
    for (int64_t s : {512, 1024, 2048, 4096, 8192, 16384}) {
      for (bool c : {false, true}) EXPECT_EQ(points.count({d, s, c}), 1u) << d << " " << s << c;
    }
  }
}

TEST(BenchProblems, OtherShapesAreThoseOfPeers) {
  std::set<std::string> names;
  for (const BenchProblem& bp : group("shapes")) names.insert(bp.name());
  EXPECT_EQ(names, (std::set<std::string>{"b4 h16 s4096 d192/128", "b1 h16 s16384 d192/128 causal",
                                          "b4 h16/2 s4096 d128", "b1 h16/2 s16384 d128 causal"}));
  // D 256 with Hq 8 is a sweep point.
  std::set<std::string> sweep;
  for (const BenchProblem& bp : group("sweep")) sweep.insert(bp.name());
  EXPECT_EQ(sweep.count("b4 h8 s4096 d256"), 1u);
  EXPECT_EQ(sweep.count("b1 h8 s16384 d256 causal"), 1u);
}

TEST(BenchProblems, EachFeatureDiffersFromPlainInOneThing) {
  std::map<std::string, std::string> names;
  for (const BenchProblem& bp : group("features")) names[bp.feature] = bp.name();
  const std::map<std::string, std::string> want = {{"plain", "b4 h16 s4096 d128"},
                                                   {"gqa", "b4 h16/2 s4096 d128"},
                                                   {"window", "b4 h16 s4096 d128 window 1024,0"},
                                                   {"bias", "b4 h16 s4096 d128 bias 1x16"},
                                                   {"sink", "b4 h16 s4096 d128 sink"},
                                                   {"softcap", "b4 h16 s4096 d128 softcap 30"},
                                                   {"stats_gap", "b4 h16 s4096 d128 stats+64"},
                                                   {"bshd", "b4 h16 s4096 d128 bshd"},
                                                   {"deterministic",
                                                    "b4 h16 s4096 d128 deterministic"}};
  EXPECT_EQ(names, want);
}

TEST(BenchProblems, NamesAreUniqueWithinAGroup) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const BenchProblem& bp : standard_problems()) {
    EXPECT_TRUE(seen.insert({bp.group, bp.name()}).second) << bp.name();
  }
  for (const BenchProblem& bp : quick_problems()) EXPECT_EQ(bp.group, "sweep");
  EXPECT_EQ(quick_problems().size(), 8u);
}

TEST(BenchProblems, ForwardFlopsFollowTheFlashAttentionConvention) {
  BenchProblem bp = group("sweep").front();  // b32 h32 s512 d64
  ASSERT_EQ(bp.name(), "b32 h32 s512 d64");
  const FlopCount f = count_flops(bp, Direction::forward);
  EXPECT_EQ(f.rule, "all");
  EXPECT_DOUBLE_EQ(f.flops, 4.0 * 32 * 32 * 512 * 512 * 64);
  EXPECT_DOUBLE_EQ(count_flops(bp, Direction::backward).flops, 2.5 * f.flops);
  bp.mask.right = 0;
  const FlopCount c = count_flops(bp, Direction::forward);
  EXPECT_EQ(c.rule, "causal half");
  EXPECT_DOUBLE_EQ(c.flops, f.flops / 2);
  EXPECT_DOUBLE_EQ(count_flops(bp, Direction::backward).flops, 2.5 * c.flops);
  // Dqk != Dv: 2·B·Hq·Sq·Skv·(Dqk + Dv).
  BenchProblem mla = group("shapes").front();
  ASSERT_EQ(mla.name(), "b4 h16 s4096 d192/128");
  EXPECT_DOUBLE_EQ(count_flops(mla, Direction::forward).flops,
                   2.0 * 4 * 16 * 4096.0 * 4096 * (192 + 128));
}

int64_t brute_force_pairs(int64_t s_q, int64_t s_kv, const Mask& m) {
  const int64_t off = m.align == MaskAlign::bottom_right ? s_kv - s_q : 0;
  int64_t n = 0;
  for (int64_t i = 0; i < s_q; ++i) {
    for (int64_t j = 0; j < s_kv; ++j) {
      n += (!m.left || j >= i + off - *m.left) && (!m.right || j <= i + off + *m.right);
    }
  }
  return n;
}

TEST(BenchProblems, VisiblePairsMatchABruteForceCount) {
  const std::vector<std::optional<int64_t>> bounds = {std::nullopt, 0, 1, 7, 40, 300};
  for (const auto& [s_q, s_kv] :
       {std::pair<int64_t, int64_t>{1, 1}, {64, 64}, {100, 37}, {37, 100}, {128, 300}}) {
    for (MaskAlign align : {MaskAlign::top_left, MaskAlign::bottom_right}) {
      for (const auto& left : bounds) {
        for (const auto& right : bounds) {
          const Mask m{align, left, right};
          EXPECT_EQ(visible_pairs(s_q, s_kv, m), brute_force_pairs(s_q, s_kv, m))
              << s_q << "x" << s_kv << " left " << left.value_or(-1) << " right "
              << right.value_or(-1) << " align " << static_cast<int>(align);
        }
      }
    }
  }
}

TEST(BenchProblems, AWindowCountsItsVisiblePairs) {
  BenchProblem window;
  for (const BenchProblem& bp : group("features")) {
    if (bp.feature == "window") window = bp;
  }
  ASSERT_EQ(window.feature, "window");
  const FlopCount f = count_flops(window, Direction::forward);
  EXPECT_EQ(f.rule, "visible");
  // Row i sees keys max(0, i - 1024) .. i: 1025 keys, fewer in the first 1024 rows.
  const double pairs = 1025.0 * 4096 - 1024.0 * 1025 / 2;
  EXPECT_DOUBLE_EQ(f.pairs, pairs);
  EXPECT_DOUBLE_EQ(f.flops, 2.0 * 4 * 16 * pairs * 256);
  // Causal with Sq != Skv is no square: its exact count, not the halving convention.
  BenchProblem rect;
  rect.shape = Shape{1, 1, 1, 100, 300, 64, 64};
  rect.mask.right = 0;
  EXPECT_EQ(count_flops(rect, Direction::forward).rule, "visible");
  EXPECT_DOUBLE_EQ(count_flops(rect, Direction::forward).pairs, 100.0 * 101 / 2);
}

TEST(BenchProblems, EveryProblemIsValidAndRoutedInBothDirections) {
  std::vector<BenchProblem> all = standard_problems();
  all.push_back(host_overhead_problem());
  for (const BenchProblem& bp : all) {
    for (Direction dir : {Direction::forward, Direction::backward}) {
      const Problem p = make_problem(bp, dir);
      Result<Plan> plan = Plan::build(p, Target::cuda_arch(90));
      ASSERT_TRUE(plan.ok()) << bp.name() << " " << direction_name(dir) << ": "
                             << plan.status().message();
      EXPECT_NE(plan->engine(), "reference") << bp.name();
    }
  }
}

TEST(BenchProblems, TheForwardLaysOutWhatTheBackwardReads) {
  for (const BenchProblem& bp : group("features")) {
    const Problem f = make_problem(bp, Direction::forward);
    const Problem b = make_problem(bp, Direction::backward);
    EXPECT_TRUE(f.has(TensorId::stats)) << bp.name();
    for (TensorId id : {TensorId::q, TensorId::k, TensorId::v, TensorId::o, TensorId::stats,
                        TensorId::bias, TensorId::sink}) {
      ASSERT_EQ(f.has(id), b.has(id)) << bp.name() << " " << to_string(id);
      if (!f.has(id)) continue;
      const TensorDesc& x = *f.tensor(id);
      const TensorDesc& y = *b.tensor(id);
      EXPECT_TRUE(x.dtype == y.dtype && x.rank == y.rank && x.dims == y.dims &&
                  x.strides == y.strides)
          << bp.name() << " " << to_string(id);
    }
    if (bp.feature == "bshd") {
      const std::array<int64_t, 4> want = {4096 * 16 * 128, 128, 16 * 128, 1};
      for (TensorId id : {TensorId::q, TensorId::o, TensorId::d_o, TensorId::dq, TensorId::dk}) {
        EXPECT_EQ(b.tensor(id)->strides, want) << to_string(id);
      }
    }
    EXPECT_EQ(b.deterministic(), bp.feature == "deterministic") << bp.name();
    if (bp.feature == "stats_gap") {
      EXPECT_EQ(b.tensor(TensorId::stats)->strides[1], 4096 + 64);
      EXPECT_EQ(b.tensor(TensorId::stats)->strides[0], 16 * (4096 + 64));
    }
  }
}

}  // namespace
}  // namespace floe::tool
