// The sm90 engine's planning, without a GPU: what it takes on sm_90 (forward, f16/bf16, head
// dims 64/128/256 with d_qk = d_v and 192/128, TMA-addressable strides, GQA, masks, padding, stats,
// softcap, sink, a TMA-addressable bias broadcast or not), that explain() names its tile, and the
// exact reasons it gives when it declines, after which sm80 (or generic) serves the problem.
// Kernels missing from the ci kernel set decline with their own reason; the tests accept that, so
// they hold for both kernel sets.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "engines/facts.h"
#include "engines/sm90/fwd_kernels.h"
#include "engines/sm90/fwd_tiles.h"
#include "engines/sm90/sm90_rules.h"
#include "floe/floe.h"
#include "support/plan_verdicts.h"
#include "support/scoped_env.h"

namespace floe {
namespace {

using test::verdict_of;

bool built(const Problem& p) {
  const TensorDesc& q = *p.tensor(TensorId::q);
  detail::sm90::FwdTile tile;
  if (!detail::sm90::fwd_tile_for(q.dims[3], p.tensor(TensorId::v)->dims[3], &tile)) return false;
  const bool score_mod = p.softcap().has_value() || p.has(TensorId::bias);
  return detail::sm90::find_fwd_kernel(tile, p.dtype(), score_mod,
                                       !score_mod && p.has(TensorId::sink)) != nullptr;
}

struct Named {
  std::string name;
  Problem problem;
};

std::vector<Named> served_problems() {
  std::vector<Named> out;
  out.push_back({"d128 bf16", Problem::forward(Shape{2, 4, 4, 300, 500, 128, 128}, DType::bf16)});
  out.push_back({"d128 f16 causal", Problem::forward(Shape{1, 2, 2, 64, 64, 128, 128}, DType::f16)
                                        .set_mask(Mask{MaskAlign::bottom_right, std::nullopt, 0})});
  out.push_back(
      {"d64 gqa stats lengths", Problem::forward(Shape{3, 8, 2, 100, 200, 64, 64}, DType::bf16)
                                    .set_stats()
                                    .set_seq_len_q()
                                    .set_seq_len_kv()});
  out.push_back({"d256 band", Problem::forward(Shape{1, 2, 1, 128, 128, 256, 256}, DType::bf16)
                                  .set_mask(Mask{MaskAlign::top_left, 7, 3})});
  {
    // bshd: heads interleaved in the rows.
    Problem p = Problem::forward(Shape{2, 4, 2, 100, 120, 128, 128}, DType::bf16);
    p.set_strides(TensorId::q, {100 * 4 * 128, 128, 4 * 128, 1});
    p.set_strides(TensorId::k, {120 * 2 * 128, 128, 2 * 128, 1});
    p.set_strides(TensorId::v, {120 * 2 * 128, 128, 2 * 128, 1});
    p.set_strides(TensorId::o, {100 * 4 * 128, 128, 4 * 128, 1});
    out.push_back({"bshd layout", std::move(p)});
  }
  out.push_back(
      {"d128 softcap",
       Problem::forward(Shape{1, 2, 2, 64, 64, 128, 128}, DType::bf16).set_softcap(30.0)});
  out.push_back(
      {"d128 sink stats",
       Problem::forward(Shape{1, 4, 2, 100, 64, 128, 128}, DType::bf16).set_sink().set_stats()});
  out.push_back({"d128 bias broadcast over b",
                 Problem::forward(Shape{2, 4, 2, 100, 64, 128, 128}, DType::f16).set_bias(1, 4)});
  out.push_back({"d64 bias softcap sink causal",
                 Problem::forward(Shape{2, 4, 2, 100, 72, 64, 64}, DType::bf16)
                     .set_bias(2, 4)
                     .set_softcap(20.0)
                     .set_sink()
                     .set_mask(Mask{MaskAlign::bottom_right, std::nullopt, 0})});
  out.push_back({"d192x128 gqa causal stats",
                 Problem::forward(Shape{2, 4, 2, 100, 200, 192, 128}, DType::bf16)
                     .set_stats()
                     .set_mask(Mask{MaskAlign::bottom_right, std::nullopt, 0})});
  out.push_back({"d192x128 f16 bias softcap sink",
                 Problem::forward(Shape{1, 2, 2, 64, 72, 192, 128}, DType::f16)
                     .set_bias(1, 2)
                     .set_softcap(30.0)
                     .set_sink()});
  {
    // A full-size head dim broadcast by stride 0, and a row stride with a gap.
    Problem p = Problem::forward(Shape{2, 4, 2, 100, 64, 128, 128}, DType::bf16).set_bias(2, 4);
    p.set_strides(TensorId::bias, {100 * 72, 0, 72, 1});
    out.push_back({"d128 bias stride-0 head", std::move(p)});
  }
  return out;
}

TEST(Sm90Plan, ServesNativeForwardProblemsOnSm90AndNamesTheTile) {
  for (const Named& n : served_problems()) {
    SCOPED_TRACE(n.name);
    auto plan = Plan::build(n.problem, Target::cuda_arch(90));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    const EngineVerdict* v = verdict_of(*plan, "sm90");
    ASSERT_NE(v, nullptr);
    if (!built(n.problem)) {
      EXPECT_NE(v->reason.find("kernel not built in the ci kernel set"), std::string::npos)
          << v->reason;
      continue;
    }
    EXPECT_TRUE(v->accepted) << v->reason;
    EXPECT_EQ(plan->engine(), "sm90");
    EXPECT_EQ(plan->workspace_bytes(), 0u);
    const std::string text = plan->explain();
    EXPECT_EQ(text.rfind("engine: sm90\n", 0), 0u) << text;
    EXPECT_NE(text.find("plan: sm90_fwd_d"), std::string::npos) << text;
    EXPECT_NE(text.find(": tile d"), std::string::npos) << text;
  }
}

// How the CTAs take the tiles (fwd_plan.cc, measured): persistent (one CTA per SM) where the tiles
// weigh the same; causal d128 and d256 longest first in L2 sections (K and V reuse in L2 between
// the CTAs in flight), persistent for short d128 keys, a CTA per tile otherwise; causal d64
// longest first with snake. The plan line names the grid and the schedule.
TEST(Sm90Plan, PersistentWhereTheTilesWeighTheSame) {
  if (std::getenv("FLOE_SM90_FWD_SCHEDULE") != nullptr) GTEST_SKIP() << "schedule overridden";
  const Target h100 = Target::cuda_arch(90);
  const std::string sms = std::to_string(h100.sm_count);
  const Problem plain = Problem::forward(Shape{4, 16, 16, 4096, 4096, 128, 128}, DType::bf16);
  auto plan = Plan::build(plain, h100);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  if (plan->engine() != "sm90") GTEST_SKIP() << "sm90 d128 bf16 not built";
  EXPECT_NE(plan->explain().find(sms + " CTAs (persistent, 2048 query tiles)"), std::string::npos)
      << plan->explain();

  const Mask causal_mask{MaskAlign::top_left, std::nullopt, 0};
  Problem causal = plain;
  causal.set_mask(causal_mask);
  plan = Plan::build(causal, h100);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_NE(plan->explain().find("2048 CTAs (a CTA per query tile, longest first in L2 sections, "
                                 "2048 query tiles)"),
            std::string::npos)
      << plan->explain();

  // Causal d128 at S 512: the same list walked by one CTA an SM.
  Problem short_causal = Problem::forward(Shape{32, 16, 16, 512, 512, 128, 128}, DType::bf16);
  short_causal.set_mask(causal_mask);
  plan = Plan::build(short_causal, h100);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_NE(plan->explain().find(
                sms + " CTAs (persistent, longest first in L2 sections, snake, 2048 query tiles)"),
            std::string::npos)
      << plan->explain();

  // Causal d64: longest first with snake, one CTA an SM.
  Problem causal_d64 = Problem::forward(Shape{4, 32, 32, 4096, 4096, 64, 64}, DType::bf16);
  causal_d64.set_mask(causal_mask);
  plan = Plan::build(causal_d64, h100);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  if (plan->engine() == "sm90") {  // d64 is in the full kernel set only
    EXPECT_NE(plan->explain().find(sms + " CTAs (persistent, longest first, snake, "),
              std::string::npos)
        << plan->explain();
  }

  // Fewer tiles than SMs: one CTA each.
  plan = Plan::build(Problem::forward(Shape{1, 2, 2, 300, 300, 128, 128}, DType::bf16), h100);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_NE(plan->explain().find("6 CTAs (persistent, 6 query tiles)"), std::string::npos)
      << plan->explain();
}

// The schedule knob (an A/B switch read at plan time) refuses what it does not know, by name,
// rather than measuring the default under another name.
TEST(Sm90Plan, AnUnknownScheduleKnobIsDeclinedByName) {
  const test::ScopedEnv knob("FLOE_SM90_FWD_SCHEDULE", nullptr);
  const Problem p = Problem::forward(Shape{2, 4, 4, 300, 500, 128, 128}, DType::bf16);
  if (!built(p)) GTEST_SKIP() << "sm90 d128 bf16 not built";
  for (const char* bad : {"bogus", "persistent:0", "lpt:x", "gridx"}) {
    SCOPED_TRACE(bad);
    knob.set(bad);
    auto plan = Plan::build(p, Target::cuda_arch(90));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    const EngineVerdict* v = verdict_of(*plan, "sm90");
    ASSERT_NE(v, nullptr);
    EXPECT_FALSE(v->accepted);
    EXPECT_NE(v->reason.find(std::string("FLOE_SM90_FWD_SCHEDULE=") + bad), std::string::npos)
        << v->reason;
  }
  for (const char* good : {"grid", "persistent:3", "lpts"}) {
    SCOPED_TRACE(good);
    knob.set(good);
    auto plan = Plan::build(p, Target::cuda_arch(90));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_EQ(plan->engine(), "sm90") << plan->explain();
  }
}

// Softcap and bias (and a sink beside them) take the score-mod kernel, a sink alone the plain
// kernel's sink sibling (the plain one stays as it was), and the plan line says which features it
// serves; a plain problem's says none.
TEST(Sm90Plan, ScoreModsTakeTheScoreModKernelAndThePlanLineNamesThem) {
  const Shape shape{2, 4, 2, 128, 128, 128, 128};
  Problem p = Problem::forward(shape, DType::bf16).set_bias(1, 4).set_softcap(30.0).set_sink();
  if (!built(p)) GTEST_SKIP() << "sm90's d128 bf16 score-mod kernel is not in this build";
  auto plan = Plan::build(p, Target::cuda_arch(90));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->engine(), "sm90") << plan->explain();
  const std::string text = plan->explain();
  EXPECT_NE(text.find("plan: sm90_fwd_d128_bf16_score_mod: tile d128"), std::string::npos) << text;
  EXPECT_NE(text.find("; score mods: softcap, bias staged by TMA beside K and V (broadcast over b: "
                      "a tile's batches side by side), sink"),
            std::string::npos)
      << text;

  plan = Plan::build(Problem::forward(shape, DType::bf16).set_sink(), Target::cuda_arch(90));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_NE(plan->explain().find("plan: sm90_fwd_d128_bf16_sink: tile d128"), std::string::npos)
      << plan->explain();
  EXPECT_NE(plan->explain().find("; score mods: sink"), std::string::npos) << plan->explain();

  plan = Plan::build(Problem::forward(shape, DType::bf16), Target::cuda_arch(90));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_NE(plan->explain().find("plan: sm90_fwd_d128_bf16"), std::string::npos) << plan->explain();
  EXPECT_EQ(plan->explain().find("score mod"), std::string::npos) << plan->explain();
}

// Plain problems take the plain kernel with pingpong up to 4096 keys (a query tile's once-a-tile
// work is then a large share of it), the plain kernel beyond; FLOE_SM90_FWD_PINGPONG = 0 | 1
// overrides that at plan time and refuses any other value by name.
TEST(Sm90Plan, ShortSequencesTakeThePingpongKernel) {
  const test::ScopedEnv knob("FLOE_SM90_FWD_PINGPONG", nullptr);
  const Problem short_s = Problem::forward(Shape{32, 16, 16, 512, 512, 128, 128}, DType::bf16);
  const Problem long_s = Problem::forward(Shape{2, 16, 16, 8192, 8192, 128, 128}, DType::bf16);
  if (!built(short_s)) GTEST_SKIP() << "sm90 d128 bf16 not built";
  auto explain = [](const Problem& p) {
    auto plan = Plan::build(p, Target::cuda_arch(90));
    EXPECT_TRUE(plan.ok()) << plan.status().message();
    return plan.ok() ? plan->explain() : std::string();
  };
  EXPECT_NE(explain(short_s).find("plan: sm90_fwd_d128_bf16_pingpong: tile d128"),
            std::string::npos)
      << explain(short_s);
  EXPECT_NE(explain(long_s).find("plan: sm90_fwd_d128_bf16: tile d128"), std::string::npos)
      << explain(long_s);
  // Score mods keep their kernels.
  Problem capped = short_s;
  capped.set_softcap(30.0);
  if (built(capped)) {
    EXPECT_NE(explain(capped).find("plan: sm90_fwd_d128_bf16_score_mod"), std::string::npos);
  }
  knob.set("0");
  EXPECT_NE(explain(short_s).find("plan: sm90_fwd_d128_bf16: tile d128"), std::string::npos)
      << explain(short_s);
  knob.set("1");
  EXPECT_NE(explain(long_s).find("plan: sm90_fwd_d128_bf16_pingpong: tile d128"), std::string::npos)
      << explain(long_s);
  knob.set("yes");
  {
    auto plan = Plan::build(short_s, Target::cuda_arch(90));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    const EngineVerdict* v = verdict_of(*plan, "sm90");
    ASSERT_NE(v, nullptr);
    EXPECT_FALSE(v->accepted);
    EXPECT_NE(v->reason.find("FLOE_SM90_FWD_PINGPONG=yes"), std::string::npos) << v->reason;
  }
}

TEST(Sm90Plan, TheCiKernelSetHoldsD128Bf16) {
  const auto* k = detail::sm90::find_fwd_kernel(detail::sm90::FwdTile::d128, DType::bf16);
  ASSERT_NE(k, nullptr);
  EXPECT_LE(k->smem_bytes, detail::sm90::fwd_tile_shape(detail::sm90::FwdTile::d128).smem_bytes());
  EXPECT_EQ(k->threads, 384);
  const auto* m = detail::sm90::find_fwd_kernel(detail::sm90::FwdTile::d128, DType::bf16, true);
  ASSERT_NE(m, nullptr);
  EXPECT_NE(m, k);
  EXPECT_STREQ(k->name, "sm90_fwd_d128_bf16");
  EXPECT_STREQ(m->name, "sm90_fwd_d128_bf16_score_mod");
  EXPECT_LE(m->smem_bytes,
            detail::sm90::fwd_tile_shape(detail::sm90::FwdTile::d128).smem_bytes(true));
  EXPECT_LE(m->smem_bytes, 227 * 1024);
  EXPECT_EQ(m->threads, 384);
  const auto* s =
      detail::sm90::find_fwd_kernel(detail::sm90::FwdTile::d128, DType::bf16, false, true);
  ASSERT_NE(s, nullptr);
  EXPECT_NE(s, k);
  EXPECT_NE(s, m);
  EXPECT_STREQ(s->name, "sm90_fwd_d128_bf16_sink");
  EXPECT_EQ(s->smem_bytes, k->smem_bytes);  // the plain kernel's storage
  const auto* pp =
      detail::sm90::find_fwd_kernel(detail::sm90::FwdTile::d128, DType::bf16, false, false, true);
  ASSERT_NE(pp, nullptr);
  EXPECT_STREQ(pp->name, "sm90_fwd_d128_bf16_pingpong");
  EXPECT_EQ(pp->smem_bytes, k->smem_bytes);
  EXPECT_EQ(detail::sm90::find_fwd_kernel(detail::sm90::FwdTile::d128, DType::f32), nullptr);
}

// Ragged (THD) forwards take the serving kernel (fwd_launch.cuh's ServingTraits): both sides
// packed (one side alone is declined, below), i32 or i64 offsets, valid lengths, causal, both stats
// layouts, strided tokens. The plan line names the serving kernel and the ragged sides; no
// workspace.
TEST(Sm90Plan, RaggedForwardsTakeTheServingKernel) {
  const Shape s{3, 8, 2, 150, 300, 128, 128};
  struct Case {
    std::string name, sides;
    Problem problem;
  };
  std::vector<Case> cases;
  cases.push_back({"both i64, causal", "ragged q and kv ",
                   Problem::forward(s, DType::f16)
                       .set_ragged_q(500, DType::i64)
                       .set_ragged_kv(700, DType::i64)
                       .set_causal(MaskAlign::bottom_right)});
  {
    Problem p = Problem::forward(s, DType::bf16)
                    .set_ragged_q(420)
                    .set_ragged_kv(900)
                    .set_seq_len_q()
                    .set_seq_len_kv()
                    .set_stats()
                    .set_mask(Mask{MaskAlign::top_left, 40, 3});
    p.set_strides(TensorId::stats, {1, 420});       // FlashAttention's [h, T]
    p.set_strides(TensorId::q, {8 * 136, 136, 1});  // a gap after each head's row
    cases.push_back({"both, heads-major stats, strided q", "ragged q and kv ", std::move(p)});
  }
  const auto* serving =
      detail::sm90::find_fwd_serving_kernel(detail::sm90::FwdTile::d128, DType::bf16);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto plan = Plan::build(c.problem, Target::cuda_arch(90));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    const EngineVerdict* v = verdict_of(*plan, "sm90");
    ASSERT_NE(v, nullptr);
    if (serving == nullptr) {
      EXPECT_NE(v->reason.find("kernel not built in the ci kernel set (tile d128"),
                std::string::npos)
          << v->reason;
      continue;
    }
    EXPECT_TRUE(v->accepted) << v->reason;
    EXPECT_EQ(plan->engine(), "sm90");
    EXPECT_EQ(plan->workspace_bytes(), 0u);
    const std::string text = plan->explain();
    EXPECT_NE(text.find("plan: sm90_fwd_serving_d128_"), std::string::npos) << text;
    EXPECT_NE(text.find("; " + c.sides + "(rows at each slot's offset"), std::string::npos) << text;
  }
  ASSERT_NE(serving, nullptr) << "the ci kernel set holds the d128 serving kernel";
  EXPECT_STREQ(serving->name, "sm90_fwd_serving_d128_bf16");
  EXPECT_EQ(serving->threads, 384);
  EXPECT_EQ(serving->smem_bytes,
            detail::sm90::find_fwd_kernel(detail::sm90::FwdTile::d128, DType::bf16)->smem_bytes);
}

// The d128 serving kernel serves `problem`, its plan line holding `plan_text`, with no workspace.
void expect_served_by_the_serving_kernel(const Problem& problem, const std::string& plan_text) {
  auto plan = Plan::build(problem, Target::cuda_arch(90));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->engine(), "sm90") << plan->explain();
  EXPECT_EQ(plan->workspace_bytes(), 0u);
  const std::string text = plan->explain();
  EXPECT_NE(text.find("plan: sm90_fwd_serving_d128_bf16"), std::string::npos) << text;
  EXPECT_NE(text.find(plan_text), std::string::npos) << text;
}

// One packed side beside a dense one takes the serving kernel, whose plan line names the packed
// side (the dense side's rows at each batch: fwd_mainloop.cuh's batch_coordinate).
TEST(Sm90Plan, OnePackedSideTakesTheServingKernel) {
  const auto* serving =
      detail::sm90::find_fwd_serving_kernel(detail::sm90::FwdTile::d128, DType::bf16);
  if (serving == nullptr) GTEST_SKIP() << "sm90's d128 serving kernel is not in this build";
  const Shape s{3, 4, 2, 150, 300, 128, 128};
  const struct {
    const char* name;
    Problem problem;
    const char* plan;
  } cases[] = {
      {"ragged q, dense kv with lengths",
       Problem::forward(s, DType::bf16).set_ragged_q(400).set_seq_len_kv().set_stats(),
       "; ragged q (rows at each slot's offset"},
      {"ragged kv i64, dense q with lengths, causal",
       Problem::forward(s, DType::bf16)
           .set_ragged_kv(600, DType::i64)
           .set_seq_len_q()
           .set_causal(MaskAlign::bottom_right),
       "; ragged kv (rows at each slot's offset"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    expect_served_by_the_serving_kernel(c.problem, c.plan);
  }
}

// A paged K/V cache takes the serving kernel, whose plan line names the page and box sizes (a key
// tile's boxes lie within one page: min(P, block_n) rows), beside a ragged or a dense query side.
// Page sizes whose boxes would straddle pages or fall out of the swizzle's phase, and score mods,
// decline by name.
TEST(Sm90Plan, PagedKvTakesTheServingKernel) {
  const auto* serving =
      detail::sm90::find_fwd_serving_kernel(detail::sm90::FwdTile::d128, DType::bf16);
  if (serving == nullptr) GTEST_SKIP() << "sm90's d128 serving kernel is not in this build";
  const Shape s{3, 4, 2, 150, 512, 128, 128};
  const struct {
    const char* name;
    Problem problem;
    const char* plan;  // nullptr: declined with `reason`
    const char* reason;
  } cases[] = {
      {"ragged q, pages of 16",
       Problem::forward(s, DType::bf16).set_ragged_q(400).set_paged_kv(16, 100),
       "; ragged q (rows at each slot's offset, writes within the slot); paged kv (pages of 16 "
       "rows, boxes of 16 from the block table, a tile's pages read together)",
       nullptr},
      {"dense q with lengths, pages of 256, causal",
       Problem::forward(s, DType::bf16)
           .set_paged_kv(256, 7)
           .set_seq_len_q()
           .set_causal(MaskAlign::bottom_right),
       "; paged kv (pages of 256 rows, boxes of 128 from the block table)", nullptr},
      {"pages of 48", Problem::forward(s, DType::bf16).set_ragged_q(400).set_paged_kv(48, 40),
       nullptr,
       "paged_kv: page size 48: sm90's paged loads need a multiple of 8 rows that divides the "
       "tile's 128 keys or is a multiple of them"},
      {"pages of 4", Problem::forward(s, DType::bf16).set_paged_kv(4, 400), nullptr,
       "paged_kv: page size 4: sm90's paged loads need a multiple of 8 rows that divides the "
       "tile's 128 keys or is a multiple of them"},
      {"softcap", Problem::forward(s, DType::bf16).set_paged_kv(64, 30).set_softcap(30.0), nullptr,
       "softcap with a paged K/V cache: sm90's serving kernel has no score mods yet"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    if (c.plan != nullptr) {
      expect_served_by_the_serving_kernel(c.problem, c.plan);
      continue;
    }
    auto plan = Plan::build(c.problem, Target::cuda_arch(90));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_NE(plan->engine(), "sm90");
    const EngineVerdict* v = verdict_of(*plan, "sm90");
    ASSERT_NE(v, nullptr);
    EXPECT_FALSE(v->accepted);
    EXPECT_EQ(v->reason, c.reason);
  }
}

// A paged tile's pages read together where pages are smaller than the tile and it has at most 8
// boxes (pages of 16 and up at d128); not pages of 8 (16 boxes), nor pages as large as the tile.
TEST(Sm90Plan, PagedLookupsBatchedWherePagesAreSmallerThanTheTile) {
  if (detail::sm90::find_fwd_serving_kernel(detail::sm90::FwdTile::d128, DType::bf16) == nullptr) {
    GTEST_SKIP() << "sm90's d128 serving kernel is not in this build";
  }
  const Shape s{3, 4, 2, 150, 512, 128, 128};
  auto explain = [&](int64_t page, int64_t pages) {
    auto plan = Plan::build(Problem::forward(s, DType::bf16).set_paged_kv(page, pages),
                            Target::cuda_arch(90));
    EXPECT_TRUE(plan.ok()) << plan.status().message();
    return plan.ok() ? plan->explain() : std::string();
  };
  const std::string together = ", a tile's pages read together)";
  for (int64_t page : {16, 32, 64}) {
    SCOPED_TRACE(page);
    EXPECT_NE(explain(page, 3 * 512 / page)
                  .find("boxes of " + std::to_string(page) + " from the block table" + together),
              std::string::npos)
        << explain(page, 3 * 512 / page);
  }
  for (int64_t page : {8, 128, 256}) {
    SCOPED_TRACE(page);
    const std::string text = explain(page, 3 * 512 / page + 3);
    EXPECT_EQ(text.find(together), std::string::npos) << text;
    EXPECT_NE(text.find("plan: sm90_fwd_serving_d128_bf16"), std::string::npos) << text;
  }
}

// The TMA views of Q-, K- and V-shaped tensors (sm90_rules.cc's tma_tensor): dense [b, h, s, d],
// a ragged side's [T, h, d] as [1, h, T, d], a paged cache's [pages, P, h, d] as [pages, h, P, d]
// in one-chunk boxes, each through the declared strides.
TEST(Sm90Plan, TmaTensorsViewEachLayoutAsBatchHeadRowsColumns) {
  const Shape s{3, 4, 2, 150, 300, 128, 128};
  Problem p = Problem::forward(s, DType::bf16).set_ragged_q(400).set_paged_kv(16, 100);
  p.set_strides(TensorId::k, {2 * 16 * 136, 136, 16 * 136, 1});  // HND pages, a gap a row
  const detail::Facts f = detail::make_facts(p);
  const detail::sm90::TmaTensor q = detail::sm90::tma_tensor(f, TensorId::q, 64);
  EXPECT_EQ(std::vector<int64_t>({q.b, q.h, q.s, q.d}), std::vector<int64_t>({1, 4, 400, 128}));
  EXPECT_EQ(std::vector<int64_t>({q.stride_b, q.stride_h, q.stride_s}),
            std::vector<int64_t>({0, 128, 4 * 128}));
  EXPECT_EQ(q.box_chunks, 0);
  const detail::sm90::TmaTensor k = detail::sm90::tma_tensor(f, TensorId::k, 16);
  EXPECT_EQ(std::vector<int64_t>({k.b, k.h, k.s, k.d}), std::vector<int64_t>({100, 2, 16, 128}));
  EXPECT_EQ(std::vector<int64_t>({k.stride_b, k.stride_h, k.stride_s}),
            std::vector<int64_t>({2 * 16 * 136, 16 * 136, 136}));
  EXPECT_EQ(k.box_rows, 16);
  EXPECT_EQ(k.box_chunks, 1);
  EXPECT_TRUE(k.bf16);
  const Problem dense = Problem::forward(s, DType::f16);
  const detail::sm90::TmaTensor v =
      detail::sm90::tma_tensor(detail::make_facts(dense), TensorId::v, 128);
  EXPECT_EQ(std::vector<int64_t>({v.b, v.h, v.s, v.d}), std::vector<int64_t>({3, 2, 300, 128}));
  EXPECT_EQ(std::vector<int64_t>({v.stride_b, v.stride_h, v.stride_s}),
            std::vector<int64_t>({2 * 300 * 128, 300 * 128, 128}));
  EXPECT_EQ(v.box_chunks, 0);
  EXPECT_FALSE(v.bf16);
}

struct Declined {
  std::string name;
  Problem problem;
  Target target;
  std::string reason;
};

std::vector<Declined> declined_problems() {
  std::vector<Declined> out;
  const Target h100 = Target::cuda_arch(90);
  const Shape d128{1, 2, 2, 64, 64, 128, 128};
  out.push_back({"sm_80", Problem::forward(d128, DType::bf16), Target::cuda_arch(80),
                 "its kernels are built for sm_90a only (target is sm_80)"});
  out.push_back(
      {"cpu", Problem::forward(d128, DType::bf16), Target::cpu(1), "runs on CUDA devices only"});
  {
    Problem p = Problem::forward(Shape{1, 2, 2, 64, 60, 128, 128}, DType::bf16).set_bias(1, 2);
    out.push_back({"bias rows of 60 keys (120 bytes)", p, h100,
                   "tensor 'bias' strides[2] = 60: sm90 stages the bias by TMA, which needs the "
                   "row stride a positive multiple of 8 elements (16 bytes) below 2^39"});
  }
  {
    Problem p = Problem::forward(d128, DType::bf16).set_bias(1, 2);
    p.set_strides(TensorId::bias, {0, 64 * 128, 128, 2});
    out.push_back({"bias innermost stride", p, h100,
                   "tensor 'bias' strides[3] = 2: sm90 stages the bias by TMA, which needs a unit "
                   "innermost stride"});
  }
  {
    Problem p = Problem::forward(Shape{2, 2, 2, 64, 64, 128, 128}, DType::bf16).set_bias(2, 2);
    p.set_strides(TensorId::bias, {2 * 64 * 64 + 4, 64 * 64, 64, 1});
    out.push_back({"bias batch stride", p, h100,
                   "tensor 'bias' strides[0] = 8196: sm90 stages the bias by TMA, which needs the "
                   "strides of the batch and head dims it does not broadcast (stride 0 or size 1 "
                   "broadcasts) a positive multiple of 8 elements (16 bytes) below 2^39"});
  }
  out.push_back({"negative scale", Problem::forward(d128, DType::bf16).set_scale(-0.5), h100,
                 "scale = -0.500000: sm90 needs a positive scale"});
  out.push_back({"d128x192", Problem::forward(Shape{1, 2, 2, 64, 64, 128, 192}, DType::bf16), h100,
                 "head dims d_qk = 128, d_v = 192: sm90 has tiles for d_qk = d_v = 64, 128 or "
                 "256, and d_qk = 192 with d_v = 128, only"});
  out.push_back({"d96", Problem::forward(Shape{1, 2, 2, 64, 64, 96, 96}, DType::f16), h100,
                 "head dims d_qk = 96, d_v = 96: sm90 has tiles for d_qk = d_v = 64, 128 or 256, "
                 "and d_qk = 192 with d_v = 128, only"});
  {
    Problem p = Problem::forward(d128, DType::bf16);
    p.set_strides(TensorId::k, {2 * 64 * 256, 64 * 256, 256, 2});
    out.push_back({"k innermost stride", p, h100,
                   "tensor 'k' strides[3] = 2: sm90's TMA loads need a unit innermost stride"});
  }
  {
    Problem p = Problem::forward(d128, DType::bf16);
    p.set_strides(TensorId::v, {2 * 64 * 132, 64 * 132, 132, 1});
    out.push_back({"v rows not 16-byte aligned", p, h100,
                   "tensor 'v' strides[2] = 132: sm90's TMA loads need every outer stride a "
                   "positive multiple of 8 elements (16 bytes) below 2^39"});
  }
  {
    Problem p = Problem::forward(Shape{2, 2, 2, 64, 64, 128, 128}, DType::bf16);
    p.set_strides(TensorId::o, {2 * 64 * 128 + 4, 64 * 128, 128, 1});
    out.push_back({"o batch stride", p, h100,
                   "tensor 'o' strides[0] = 16388: sm90 needs every outer stride a multiple of 8 "
                   "elements (16 bytes)"});
  }
  // Ragged problems: what the serving kernel does not do yet, by name (sm80 serves them).
  const Shape ragged{3, 4, 2, 150, 300, 128, 128};
  out.push_back({"ragged softcap",
                 Problem::forward(ragged, DType::bf16).set_ragged_kv(600).set_softcap(30.0), h100,
                 "softcap with a ragged side: sm90's serving kernel has no score mods yet"});
  out.push_back({"ragged sink", Problem::forward(ragged, DType::bf16).set_ragged_q(400).set_sink(),
                 h100,
                 "tensor 'sink' with a ragged side: sm90's serving kernel has no score mods "
                 "yet"});
  out.push_back({"ragged bias",
                 Problem::forward(ragged, DType::bf16).set_ragged_q(400).set_bias(1, 4), h100,
                 "tensor 'bias' with a ragged side: sm90's serving kernel has no score mods yet"});
  out.push_back({"ragged backward", Problem::backward(ragged, DType::bf16).set_ragged_q(400), h100,
                 "ragged_q: sm90's backward serves no ragged (packed) query side yet"});
  out.push_back({"ragged kv backward", Problem::backward(ragged, DType::bf16).set_ragged_kv(600),
                 h100, "ragged_kv: sm90's backward serves no ragged (packed) key side yet"});
  {
    Problem p = Problem::forward(ragged, DType::bf16).set_ragged_q(400).set_ragged_kv(600);
    p.set_strides(TensorId::k, {2 * 256, 256, 2});
    out.push_back({"ragged k innermost stride", p, h100,
                   "tensor 'k' strides[2] = 2: sm90's TMA loads need a unit innermost stride"});
  }
  {
    Problem p = Problem::forward(ragged, DType::bf16).set_ragged_q(400).set_ragged_kv(600);
    p.set_strides(TensorId::q, {4 * 132, 132, 1});
    out.push_back({"ragged q token rows not 16-byte aligned", p, h100,
                   "tensor 'q' strides[1] = 132: sm90's TMA loads need every outer stride a "
                   "positive multiple of 8 elements (16 bytes) below 2^39"});
  }
  return out;
}

TEST(Sm90Plan, DeclinesWithTheExactReasonAndAnotherEngineServes) {
  for (const Declined& d : declined_problems()) {
    SCOPED_TRACE(d.name);
    auto plan = Plan::build(d.problem, d.target);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_NE(plan->engine(), "sm90") << plan->explain();
    const EngineVerdict* v = verdict_of(*plan, "sm90");
    ASSERT_NE(v, nullptr);
    EXPECT_FALSE(v->accepted);
    EXPECT_EQ(v->reason, d.reason);
  }
}

TEST(Sm90Plan, ArchitecturePlansCannotExecute) {
  const Problem p = Problem::forward(Shape{1, 2, 2, 64, 64, 128, 128}, DType::bf16);
  auto plan = Plan::build(p, Target::cuda_arch(90));
  ASSERT_TRUE(plan.ok());
  if (plan->engine() != "sm90") GTEST_SKIP() << "sm90's d128 bf16 kernel is not in this build";
  const Status st = plan->execute(Arguments{}, nullptr, 0);
  EXPECT_EQ(st.code(), Code::not_supported);
}

}  // namespace
}  // namespace floe
