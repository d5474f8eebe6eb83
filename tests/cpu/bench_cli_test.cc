// floe bench without a GPU: it says so and exits non-zero, its options are listed and checked
// before any device is needed; and what it times is what DESIGN §6 and PEERS.md name, worth
// the FLOPs §6 counts (causal halved, other bands by their exact visible pairs).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

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
       {"--sweep",       "--group",   "--direction",   "--engine",       "--json",
        "--warmups",     "--calls",   "--b",           "--h-q",          "--h-kv",
        "--gqa",         "--s-q",     "--s-kv",        "--d-qk",         "--d-v",
        "--causal",      "--dtype",   "--window-left", "--window-right", "--bias",
        "--sink",        "--softcap", "--stats-gap",   "--layout",       "--deterministic",
        "--no-bias-grad"}) {
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
  const std::map<std::string, std::string> want = {
      {"plain", "b4 h16 s4096 d128"},
      {"gqa", "b4 h16/2 s4096 d128"},
      {"window", "b4 h16 s4096 d128 window 1024,0"},
      {"bias", "b4 h16 s4096 d128 bias 1x16"},
      {"bias_nograd", "b4 h16 s4096 d128 bias 1x16 nograd"},
      {"sink", "b4 h16 s4096 d128 sink"},
      {"softcap", "b4 h16 s4096 d128 softcap 30"},
      {"stats_gap", "b4 h16 s4096 d128 stats+64"},
      {"bshd", "b4 h16 s4096 d128 bshd"},
      {"deterministic", "b4 h16 s4096 d128 deterministic"}};
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

// The serving group (never in the default run): valid in each direction it is timed in,
// served on Hopper by sm90 (ragged and paged forwards: its serving kernel; the chunked prefill's
// dense twin) or sm80 (ragged backwards: its serving kernels), or a decode engine ranked ahead of
// them the short query sides, and by reference on the CPU, with host inputs that match their
// declarations.
TEST(BenchProblems, ServingProblemsAreValidAndRouted) {
  const std::vector<BenchProblem> serving = serving_problems();
  ASSERT_FALSE(serving.empty());
  for (const BenchProblem& bp : standard_problems()) EXPECT_NE(bp.group, "serving");
  int ragged = 0, paged = 0, dense = 0, zipf = 0, prefill = 0, twin = 0;
  std::set<std::string> names;
  for (const BenchProblem& bp : serving) {
    EXPECT_EQ(bp.group, "serving");
    EXPECT_TRUE(names.insert(bp.name()).second) << bp.name();
    ragged += bp.ragged();
    paged += bp.paged();
    dense += bp.dense_decode;
    // A chunked prefill over pages, and its dense twin: neither lengths nor pages.
    const bool dense_twin = !bp.ragged() && !bp.paged() && !bp.dense_decode;
    prefill += bp.paged() && bp.shape.s_q > 16;
    twin += dense_twin;
    // GQA 32:8, but SERVING.md §0's skewed varlen set, which is MHA 16.
    const bool skewed = bp.ragged() && bp.shape.h_q == 16;
    EXPECT_EQ(bp.shape.h_q, skewed ? 16 : 32) << bp.name();
    EXPECT_EQ(bp.shape.h_kv, skewed ? 16 : 8) << bp.name();
    EXPECT_EQ(bp.shape.d_qk, 128);
    if (skewed) {
      int64_t tokens = 0;
      for (int64_t len : bp.seq_q) {
        EXPECT_GE(len, 138);
        EXPECT_LE(len, 2069);
        tokens += len;
      }
      EXPECT_EQ(tokens, 16384);
      EXPECT_EQ(bp.shape.b, 16);
    }
    EXPECT_EQ(bp.decode(), (bp.paged() && bp.shape.s_q <= 16) || bp.dense_decode);
    EXPECT_EQ(bp.forward_only(), bp.paged() || bp.dense_decode);
    EXPECT_EQ(kv_bytes_read(bp) > 0, bp.decode()) << bp.name();
    if (bp.dense_decode) {
      EXPECT_FALSE(bp.paged() || bp.ragged()) << bp.name();
      EXPECT_TRUE(bp.seq_q.empty() && bp.seq_kv.empty()) << bp.name();
      EXPECT_EQ(bp.name().rfind("dense ", 0), 0u) << bp.name();
    } else if (dense_twin) {
      EXPECT_TRUE(bp.seq_q.empty() && bp.seq_kv.empty()) << bp.name();
      EXPECT_LT(bp.shape.s_q, bp.shape.s_kv) << bp.name();
    } else {
      ASSERT_EQ(bp.seq_q.size(), static_cast<size_t>(bp.shape.b)) << bp.name();
      ASSERT_EQ(bp.seq_kv.size(), static_cast<size_t>(bp.shape.b)) << bp.name();
    }
    if (bp.lengths == "zipf") {
      // Skewed at the bytes of a uniform shape: B * S keys in all, the longest the envelope.
      ++zipf;
      int64_t sum = 0, longest = 0;
      for (int64_t len : bp.seq_kv) {
        EXPECT_GE(len, 1);
        sum += len;
        longest = std::max(longest, len);
      }
      EXPECT_EQ(longest, bp.shape.s_kv);
      EXPECT_TRUE(sum == 64 * 8192 || sum == 32 * 4096) << sum;
      EXPECT_GT(longest, 4 * sum / bp.shape.b) << bp.name();
    }
    for (Direction dir : {Direction::forward, Direction::backward}) {
      if (dir == Direction::backward && bp.forward_only()) continue;
      const Problem p = make_problem(bp, dir);
      Result<Plan> gpu = Plan::build(p, Target::cuda_arch(90));
      ASSERT_TRUE(gpu.ok()) << bp.name() << " " << direction_name(dir) << ": "
                            << gpu.status().message();
      const bool sm90_serves =
          dense_twin || (dir == Direction::forward && (bp.ragged() || bp.paged()));
      EXPECT_TRUE(gpu->engine() == (sm90_serves ? "sm90" : "sm80") ||
                  (bp.decode() && gpu->engine() == "decode"))
          << bp.name() << " " << direction_name(dir) << ": " << gpu->engine();
      Result<Plan> cpu = Plan::build(p, Target::cpu());
      ASSERT_TRUE(cpu.ok()) << bp.name() << " " << direction_name(dir) << ": "
                            << cpu.status().message();
      EXPECT_EQ(cpu->engine(), "reference") << bp.name();
      for (const auto& [id, values] : serving_inputs(bp)) {
        ASSERT_TRUE(p.has(id)) << bp.name() << " " << to_string(id);
        EXPECT_EQ(p.tensor(id)->dtype, DType::i32) << to_string(id);
        EXPECT_EQ(p.tensor(id)->span_bytes(), values.size() * 4)
            << bp.name() << " " << to_string(id);
      }
    }
    if (bp.paged()) {
      // A paged backward is refused by validation: the bench must never time one.
      EXPECT_TRUE(bp.forward_only());
      EXPECT_FALSE(Plan::build(make_problem(bp, Direction::backward), Target::cpu()).ok());
    }
  }
  EXPECT_EQ(ragged, 2);  // the 8-sequence GQA prefill and the skewed set
  EXPECT_GE(paged, 4);
  EXPECT_EQ(prefill, 2);  // pages of 64 and 16
  EXPECT_EQ(twin, 1);
  EXPECT_EQ(dense, 2);
  EXPECT_EQ(zipf, 2);
}

TEST(BenchProblems, ServingInputsAreOffsetsAndAScatteredPermutation) {
  for (const BenchProblem& bp : serving_problems()) {
    for (const auto& [id, values] : serving_inputs(bp)) {
      if (id == TensorId::offsets_q || id == TensorId::offsets_kv) {
        const std::vector<int64_t>& len = id == TensorId::offsets_q ? bp.seq_q : bp.seq_kv;
        ASSERT_EQ(values.size(), len.size() + 1);
        EXPECT_EQ(values.front(), 0);
        for (size_t b = 0; b < len.size(); ++b) {
          EXPECT_EQ(values[b + 1] - values[b], len[b]);
          EXPECT_GE(len[b], 128);
          EXPECT_LE(len[b], bp.shape.s_q);  // the envelope is the longest
        }
        EXPECT_EQ(values.back(), bp.total_q());
      } else if (id == TensorId::block_table) {
        // [B, max_pages]: each batch's first ceil(len / page) entries, together a permutation
        // of the cache's pages; the entries past a batch's length 0.
        const int64_t max_pages = (bp.shape.s_kv + bp.page_size - 1) / bp.page_size;
        ASSERT_EQ(values.size(), static_cast<size_t>(bp.shape.b * max_pages));
        std::vector<int32_t> used;
        for (size_t b = 0; b < bp.seq_kv.size(); ++b) {
          const int64_t pages = (bp.seq_kv[b] + bp.page_size - 1) / bp.page_size;
          for (int64_t k = 0; k < max_pages; ++k) {
            const int32_t v = values[b * static_cast<size_t>(max_pages) + static_cast<size_t>(k)];
            if (k < pages) {
              used.push_back(v);
            } else {
              EXPECT_EQ(v, 0) << bp.name();
            }
          }
        }
        ASSERT_EQ(used.size(), static_cast<size_t>(bp.num_pages()));
        // Scattered: a batch's pages are not one run of consecutive pages.
        int consecutive = 0;
        for (size_t i = 1; i < used.size(); ++i) consecutive += used[i] == used[i - 1] + 1;
        EXPECT_LT(consecutive, static_cast<int>(used.size()) / 4) << bp.name();
        std::sort(used.begin(), used.end());
        for (size_t i = 0; i < used.size(); ++i) ASSERT_EQ(used[i], static_cast<int32_t>(i));
      } else {
        EXPECT_EQ(id, TensorId::seq_len_kv);
        ASSERT_EQ(values.size(), bp.seq_kv.size());
        for (size_t b = 0; b < values.size(); ++b) EXPECT_EQ(values[b], bp.seq_kv[b]);
      }
    }
  }
  // The same lengths and tables in every run.
  const std::vector<BenchProblem> a = serving_problems(), b = serving_problems();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].seq_q, b[i].seq_q);
    EXPECT_EQ(serving_inputs(a[i]), serving_inputs(b[i]));
  }
}

// Hand counts. Ragged, lengths 3 and 5, causal bottom-right (equal lengths: top-left too):
// 3·4/2 + 5·6/2 = 21 visible pairs, forward 2·Hq·21·(Dqk + Dv) = 2·4·21·16 = 2688.
// Paged, Sq 2 over 7 keys each, bottom-right causal: rows see 6 and 7 keys, 13 per batch, 26
// in all: 2·4·26·16 = 3328; K+V read 2 batches · 7 keys · Hkv 2 · (8 + 8) · 2 bytes = 896.
TEST(BenchProblems, ServingFlopsAndBytesMatchAHandCount) {
  Mask br;
  br.align = MaskAlign::bottom_right;
  br.right = 0;

  BenchProblem ragged;
  ragged.group = "serving";
  ragged.shape = Shape{2, 4, 2, 5, 5, 8, 8};
  ragged.mask = br;
  ragged.seq_q = ragged.seq_kv = {3, 5};
  ASSERT_TRUE(ragged.ragged());
  EXPECT_EQ(ragged.total_q(), 8);
  EXPECT_DOUBLE_EQ(count_flops(ragged, Direction::forward).pairs, 21);
  EXPECT_DOUBLE_EQ(count_flops(ragged, Direction::forward).flops, 2688);
  EXPECT_DOUBLE_EQ(count_flops(ragged, Direction::backward).flops, 2.5 * 2688);
  EXPECT_EQ(kv_bytes_read(ragged), 0);
  const Problem rp = make_problem(ragged, Direction::backward);
  ASSERT_TRUE(rp.ragged_q() && rp.ragged_kv());
  EXPECT_EQ(rp.ragged_q()->total, 8);
  EXPECT_EQ(serving_inputs(ragged).front().second, (std::vector<int32_t>{0, 3, 8}));
  EXPECT_TRUE(Plan::build(rp, Target::cpu()).ok());

  BenchProblem paged;
  paged.group = "serving";
  paged.shape = Shape{2, 4, 2, 2, 7, 8, 8};
  paged.mask = br;
  paged.seq_q = {2, 2};
  paged.seq_kv = {7, 7};
  paged.page_size = 4;
  ASSERT_TRUE(paged.paged());
  EXPECT_EQ(paged.num_pages(), 4);  // ceil(7 / 4) = 2 per batch
  EXPECT_DOUBLE_EQ(count_flops(paged, Direction::forward).pairs, 26);
  EXPECT_DOUBLE_EQ(count_flops(paged, Direction::forward).flops, 3328);
  EXPECT_DOUBLE_EQ(kv_bytes_read(paged), 896);
  const Problem pp = make_problem(paged, Direction::forward);
  ASSERT_TRUE(pp.paged_kv());
  EXPECT_EQ(pp.paged_kv()->page_size, 4);
  EXPECT_EQ(pp.paged_kv()->max_pages, 2);
  EXPECT_TRUE(Plan::build(pp, Target::cpu()).ok());
  EXPECT_TRUE(Plan::build(pp, Target::cuda_arch(90)).ok());
}

}  // namespace
}  // namespace floe::tool
