// The sm90 engine's backward planning, without a GPU: what it takes on sm_90 (f16/bf16, d_qk =
// d_v = 64, 128 or 256, d_qk 192 / d_v 128, TMA-addressable strides, GQA, masks, padding
// by device lengths, softcap, sink with dSink), its three named workspace chunks (a fourth, one
// semaphore per query tile, in deterministic mode), that explain() names the tile, the mode and the
// score mods (the softcap kernel, the dSink step, the bias kernel), and the exact reasons it
// declines (a summed dBias, a bias beside a softcap, other head dims, strides), after which sm80
// serves. Kernels missing from the ci kernel set decline with
// their own reason; accepted for both kernel sets.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "engines/sm90/bwd_kernels.h"
#include "engines/sm90/bwd_tiles.h"
#include "floe/floe.h"
#include "support/plan_verdicts.h"
#include "support/scoped_env.h"

namespace floe {
namespace {

using test::verdict_of;

bool built(const Problem& p) {
  const TensorDesc& q = *p.tensor(TensorId::q);
  detail::sm90::BwdTile tile;
  if (!detail::sm90::bwd_tile_for(q.dims[3], p.tensor(TensorId::v)->dims[3], &tile)) return false;
  return detail::sm90::find_bwd_kernel(tile, p.dtype(), p.softcap().has_value(),
                                       p.has(TensorId::dsink)) != nullptr;
}

struct Named {
  std::string name;
  Problem problem;
};

std::vector<Named> served_problems() {
  std::vector<Named> out;
  out.push_back({"d128 bf16", Problem::backward(Shape{2, 4, 4, 300, 500, 128, 128}, DType::bf16)});
  out.push_back({"d128 f16 causal", Problem::backward(Shape{1, 2, 2, 64, 64, 128, 128}, DType::f16)
                                        .set_mask(Mask{MaskAlign::bottom_right, std::nullopt, 0})});
  out.push_back(
      {"d128 gqa lengths", Problem::backward(Shape{3, 8, 2, 100, 200, 128, 128}, DType::bf16)
                               .set_seq_len_q()
                               .set_seq_len_kv()});
  out.push_back({"d128 band", Problem::backward(Shape{1, 2, 1, 128, 128, 128, 128}, DType::bf16)
                                  .set_mask(Mask{MaskAlign::top_left, 7, 3})});
  out.push_back({"d64 gqa", Problem::backward(Shape{3, 8, 2, 100, 200, 64, 64}, DType::bf16)});
  out.push_back({"d64 f16 causal", Problem::backward(Shape{1, 2, 2, 70, 90, 64, 64}, DType::f16)
                                       .set_mask(Mask{MaskAlign::bottom_right, std::nullopt, 0})});
  out.push_back(
      {"d192x128 gqa causal", Problem::backward(Shape{2, 4, 2, 100, 300, 192, 128}, DType::bf16)
                                  .set_mask(Mask{MaskAlign::bottom_right, std::nullopt, 0})
                                  .set_seq_len_kv()});
  out.push_back(
      {"d128 softcap",
       Problem::backward(Shape{2, 4, 4, 300, 500, 128, 128}, DType::bf16).set_softcap(30.0)});
  out.push_back({"d128 sink", Problem::backward(Shape{2, 4, 2, 300, 500, 128, 128}, DType::f16)
                                  .set_sink()
                                  .set_mask(Mask{MaskAlign::bottom_right, std::nullopt, 0})});
  out.push_back(
      {"d64 softcap sink lengths", Problem::backward(Shape{3, 8, 2, 100, 200, 64, 64}, DType::bf16)
                                       .set_softcap(20.0)
                                       .set_sink()
                                       .set_seq_len_kv()});
  out.push_back(
      {"d192x128 softcap",
       Problem::backward(Shape{2, 4, 2, 100, 300, 192, 128}, DType::bf16).set_softcap(50.0)});
  return out;
}

// The query rows of the plan's tile, from its plan line ("... x 80-query visits"): d128 has two
// tiles (bwd_plan.cc's d128_tile picks by mask and length, where the kernel set has both).
int64_t query_rows_per_visit(const std::string& explain) {
  const size_t end = explain.find("-query visits");
  if (end == std::string::npos) return 0;
  const size_t begin = explain.rfind(' ', end) + 1;
  return std::stoll(explain.substr(begin, end - begin));
}

TEST(Sm90BwdPlan, ServesNativeBackwardProblemsWithNamedWorkspaceChunks) {
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
    const TensorDesc& q = *n.problem.tensor(TensorId::q);
    const int64_t m = query_rows_per_visit(plan->explain());
    ASSERT_GT(m, 0) << plan->explain();
    const int64_t rows = q.dims[0] * q.dims[1] * ((q.dims[2] + m - 1) / m * m);
    // dq_accum (fp32, d_qk columns), lse_log2 and delta (fp32 each), each at a 256-byte offset.
    const size_t expected = static_cast<size_t>(rows * (q.dims[3] + 2) * 4);
    EXPECT_GE(plan->workspace_bytes(), expected);
    EXPECT_LE(plan->workspace_bytes(), expected + 3 * 256);
    const std::string text = plan->explain();
    EXPECT_EQ(text.rfind("engine: sm90\n", 0), 0u) << text;
    EXPECT_NE(text.find("plan: sm90_bwd_d"), std::string::npos) << text;
    // The kernel's name and explain() say which score mods it carries.
    const bool softcap = n.problem.softcap().has_value();
    const bool dsink = n.problem.has(TensorId::dsink);
    const std::string suffix =
        softcap ? (dsink ? "_softcap_dsink:" : "_softcap:") : (dsink ? "_dsink:" : "16:");
    EXPECT_NE(text.find(suffix), std::string::npos) << text;
    EXPECT_EQ(text.find("softcap (S recomputed") != std::string::npos, softcap) << text;
    EXPECT_EQ(text.find("dSink (a fourth kernel") != std::string::npos, dsink) << text;
  }
}

// Deterministic mode: the same three chunks plus "dq_semaphore" (i32 per (batch, query head,
// query tile)), and explain() says how dQ is ordered.
TEST(Sm90BwdPlan, ServesTheDeterministicModeWithOneSemaphorePerQueryTile) {
  const Shape shapes[] = {
      {2, 8, 2, 300, 500, 128, 128}, {3, 4, 4, 100, 1000, 64, 64}, {2, 4, 1, 200, 300, 192, 128}};
  for (const Shape& sh : shapes) {
    for (bool causal : {false, true}) {
      Problem det = Problem::backward(sh, DType::bf16).set_deterministic();
      Problem plain = Problem::backward(sh, DType::bf16);
      if (causal) {
        det.set_mask(Mask{MaskAlign::bottom_right, std::nullopt, 0});
        plain.set_mask(Mask{MaskAlign::bottom_right, std::nullopt, 0});
      }
      SCOPED_TRACE("d " + std::to_string(sh.d_qk) + (causal ? " causal" : ""));
      auto plan = Plan::build(det, Target::cuda_arch(90));
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      const EngineVerdict* v = verdict_of(*plan, "sm90");
      ASSERT_NE(v, nullptr);
      if (!built(det)) {
        EXPECT_NE(v->reason.find("kernel not built in the ci kernel set"), std::string::npos)
            << v->reason;
        continue;
      }
      ASSERT_TRUE(v->accepted) << v->reason;
      EXPECT_EQ(plan->engine(), "sm90");
      const int64_t m = query_rows_per_visit(plan->explain());
      ASSERT_GT(m, 0) << plan->explain();
      // The default on the deterministic plan's tile (d128's two tiles are chosen apart: the
      // deterministic mode keeps 80 rows without a right bound).
      const test::ScopedEnv knob("FLOE_SM90_BWD_TILE", sh.d_qk != 128 ? nullptr
                                                       : m == 64      ? "d128m64"
                                                                      : "d128");
      auto base = Plan::build(plain, Target::cuda_arch(90));
      ASSERT_TRUE(base.ok()) << base.status().message();
      EXPECT_EQ(base->engine(), "sm90");
      EXPECT_EQ(query_rows_per_visit(base->explain()), m) << base->explain();
      const size_t sem = static_cast<size_t>(sh.b * sh.h_q * ((sh.s_q + m - 1) / m) * 4);
      EXPECT_GE(plan->workspace_bytes(), base->workspace_bytes() + sem);
      EXPECT_LE(plan->workspace_bytes(), base->workspace_bytes() + sem + 256);
      const std::string text = plan->explain();
      EXPECT_NE(text.find("deterministic: each query tile's dQ added by its key tiles in a fixed "
                          "order"),
                std::string::npos)
          << text;
      EXPECT_EQ(base->explain().find("deterministic"), std::string::npos) << base->explain();
    }
  }
}

// d128's tile (bwd_plan.cc's d128_tile, measured): 64 query rows for a band with a right bound
// (causal) and for up to 4k keys, 80 rows for longer keys without one and in the deterministic
// mode without one; the ci kernel set, which has 80 rows only, serves those too.
// FLOE_SM90_BWD_TILE=d128 | d128m64 forces either (a forced tile the build lacks is named), other
// head dims keep their tiles, any other value declines.
TEST(Sm90BwdPlan, D128TakesItsTileByMaskAndLengthAndTheKnobForcesOne) {
  const Mask causal_mask{MaskAlign::bottom_right, std::nullopt, 0};
  const Problem causal =
      Problem::backward(Shape{2, 4, 4, 512, 512, 128, 128}, DType::bf16).set_mask(causal_mask);
  const Problem causal_long =
      Problem::backward(Shape{1, 16, 16, 16384, 16384, 128, 128}, DType::bf16)
          .set_mask(causal_mask);
  const Problem short_keys = Problem::backward(Shape{4, 16, 16, 4096, 4096, 128, 128}, DType::bf16);
  const Problem long_keys = Problem::backward(Shape{2, 16, 16, 8192, 8192, 128, 128}, DType::bf16);
  if (!built(causal)) GTEST_SKIP() << "sm90's d128 bf16 backward is not in this build";
  const Target h100 = Target::cuda_arch(90);
  const bool m64_built =
      detail::sm90::find_bwd_kernel(detail::sm90::BwdTile::d128_m64, DType::bf16) != nullptr;
  const test::ScopedEnv knob("FLOE_SM90_BWD_TILE", nullptr);
  auto explain = [&](const Problem& p) {
    auto plan = Plan::build(p, h100);
    EXPECT_TRUE(plan.ok()) << plan.status().message();
    return plan.ok() ? plan->explain() : std::string();
  };
  const char* rows80 = "sm90_bwd_d128_bf16: tile d128, 128 keys per CTA x 80-query visits";
  const char* rows64 = "sm90_bwd_d128m64_bf16: tile d128m64, 128 keys per CTA x 64-query visits";
  for (const Problem* p : {&causal, &causal_long, &short_keys}) {
    EXPECT_NE(explain(*p).find(m64_built ? rows64 : rows80), std::string::npos) << explain(*p);
  }
  EXPECT_NE(explain(long_keys).find(rows80), std::string::npos) << explain(long_keys);
  Problem short_keys_det = short_keys;
  short_keys_det.set_deterministic();
  EXPECT_NE(explain(short_keys_det).find(rows80), std::string::npos) << explain(short_keys_det);
  Problem causal_det = causal;
  causal_det.set_deterministic();
  EXPECT_NE(explain(causal_det).find(m64_built ? rows64 : rows80), std::string::npos)
      << explain(causal_det);
  knob.set("d128");
  EXPECT_NE(explain(causal).find(rows80), std::string::npos) << explain(causal);
  knob.set("d128m64");
  {
    auto plan = Plan::build(long_keys, h100);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    const EngineVerdict* v = verdict_of(*plan, "sm90");
    ASSERT_NE(v, nullptr);
    if (m64_built) {
      EXPECT_EQ(plan->engine(), "sm90");
      EXPECT_NE(plan->explain().find(rows64), std::string::npos) << plan->explain();
    } else {
      EXPECT_EQ(v->reason, "kernel not built in the ci kernel set (backward tile d128m64, bf16)");
    }
  }
  const Problem d64 = Problem::backward(Shape{2, 4, 4, 512, 512, 64, 64}, DType::bf16);
  if (built(d64)) EXPECT_NE(explain(d64).find("tile d64,"), std::string::npos) << explain(d64);
  knob.set("d128m80");
  auto plan = Plan::build(causal, h100);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const EngineVerdict* v = verdict_of(*plan, "sm90");
  ASSERT_NE(v, nullptr);
  EXPECT_FALSE(v->accepted);
  EXPECT_EQ(v->reason, "FLOE_SM90_BWD_TILE=d128m80: must be d128 or d128m64");
}

TEST(Sm90BwdPlan, TheCiKernelSetHoldsD128Bf16) {
  const auto* k = detail::sm90::find_bwd_kernel(detail::sm90::BwdTile::d128, DType::bf16);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->threads, 384);
  EXPECT_LE(k->smem_bytes, 227 * 1024);
  EXPECT_EQ(detail::sm90::find_bwd_kernel(detail::sm90::BwdTile::d128, DType::f32), nullptr);
}

// sm90 declines `problem` with `reason`, and sm80 serves it.
void expect_sm80_serves(const Problem& problem, const std::string& reason) {
  auto plan = Plan::build(problem, Target::cuda_arch(90));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const EngineVerdict* v = verdict_of(*plan, "sm90");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->reason, reason);
  EXPECT_EQ(plan->engine(), "sm80");
}

// The bias kernel (bwd_bias.cuh): a bias of any broadcast, with a dBias of the problem's batch and
// heads or without one, on d128's 64-row tile (80 rows leave no room for the bias ring) and the
// other tiles that have room; explain names it. The ci kernel set has no bias kernel: the plan
// says which one is missing.
TEST(Sm90BwdPlan, BiasServedWhereDBiasHasOneWriterATile) {
  const Shape d128{2, 4, 2, 300, 512, 128, 128};  // bias rows of 512 keys: 16-byte aligned
  std::vector<Named> problems;
  problems.push_back(
      {"dbias per batch and head", Problem::backward(d128, DType::bf16).set_bias(2, 4)});
  problems.push_back({"dbias summed over the batch and heads",
                      Problem::backward(d128, DType::bf16).set_bias(1, 1).set_sink()});
  problems.push_back({"broadcast bias, no dbias",
                      Problem::backward(d128, DType::bf16).set_bias(1, 1).set_bias_grad(false)});
  problems.push_back(
      {"causal, lengths, sink", Problem::backward(d128, DType::f16)
                                    .set_bias(2, 4)
                                    .set_mask(Mask{MaskAlign::bottom_right, std::nullopt, 0})
                                    .set_seq_len_q()
                                    .set_sink()});
  problems.push_back(
      {"d64", Problem::backward(Shape{2, 4, 4, 200, 200, 64, 64}, DType::bf16).set_bias(2, 4)});
  problems.push_back(
      {"d192x128",
       Problem::backward(Shape{1, 4, 2, 200, 200, 192, 128}, DType::bf16).set_bias(1, 4)});
  for (const Named& n : problems) {
    SCOPED_TRACE(n.name);
    auto plan = Plan::build(n.problem, Target::cuda_arch(90));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    const TensorDesc& q = *n.problem.tensor(TensorId::q);
    detail::sm90::BwdTile tile;
    ASSERT_TRUE(
        detail::sm90::bwd_tile_for(q.dims[3], n.problem.tensor(TensorId::v)->dims[3], &tile));
    if (tile == detail::sm90::BwdTile::d128) tile = detail::sm90::BwdTile::d128_m64;
    const std::string name = detail::sm90::bwd_tile_shape(tile).name;
    if (detail::sm90::find_bwd_kernel(tile, n.problem.dtype(), false,
                                      n.problem.has(TensorId::dsink), true) == nullptr) {
      const EngineVerdict* v = verdict_of(*plan, "sm90");
      ASSERT_NE(v, nullptr);
      EXPECT_EQ(v->reason, "kernel not built in the ci kernel set (backward tile " + name + ", " +
                               to_string(n.problem.dtype()) + ")");
      continue;
    }
    EXPECT_EQ(plan->engine(), "sm90");
    const std::string text = plan->explain();
    EXPECT_NE(text.find(": tile " + name + ","), std::string::npos) << text;
    EXPECT_NE(text.find("bias (a tile a visit staged by TMA beside Q, read transposed by ldmatrix"),
              std::string::npos)
        << text;
    const auto& dbias = n.problem.tensor(TensorId::dbias);
    const bool summed =
        dbias.has_value() && (dbias->dims[0] < q.dims[0] || dbias->dims[1] < q.dims[1]);
    EXPECT_EQ(text.find("dBias = dS") != std::string::npos, dbias.has_value() && !summed) << text;
    EXPECT_EQ(text.find("dBias summed over the broadcast dims") != std::string::npos, summed)
        << text;
    // The summed dBias's fp32 chunk: a block_m x 128 tile per (query tile, key tile, summed
    // batch and head), beside the plain chunks.
    if (summed) {
      const detail::sm90::BwdTileShape& s = detail::sm90::bwd_tile_shape(tile);
      const int64_t tiles = ((q.dims[2] + s.block_m - 1) / s.block_m) *
                            ((n.problem.tensor(TensorId::k)->dims[2] + 127) / 128) *
                            dbias->dims[0] * dbias->dims[1];
      EXPECT_GE(plan->workspace_bytes(), static_cast<size_t>(tiles * s.block_m * 128 * 4));
    }
  }
  // The deterministic mode sums dBias in the sum's order (bwd_dbias_order.cuh): over the batch
  // (GQA too), over the heads, over both; one i32 semaphore a tile beside the fp32 chunk. Over
  // the heads of GQA it declines (sm80 serves it).
  {
    const Shape mha{2, 4, 4, 300, 512, 128, 128};
    std::vector<Named> served = {
        {"over the batch, GQA", Problem::backward(d128, DType::bf16).set_bias(1, 4)},
        {"over the heads", Problem::backward(mha, DType::bf16).set_bias(2, 1)},
        {"over both", Problem::backward(mha, DType::f16).set_bias(1, 1).set_sink()}};
    for (Named& d : served) {
      SCOPED_TRACE(d.name);
      d.problem.set_deterministic();
      auto plan = Plan::build(d.problem, Target::cuda_arch(90));
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      if (detail::sm90::find_bwd_kernel(detail::sm90::BwdTile::d128_m64, d.problem.dtype(), false,
                                        d.problem.has(TensorId::dsink), true) == nullptr) {
        continue;  // the ci kernel set: the plan says which kernel is missing (above)
      }
      EXPECT_EQ(plan->engine(), "sm90");
      const std::string text = plan->explain();
      EXPECT_NE(text.find("the pairs of the sum in its order at each tile (one semaphore a tile)"),
                std::string::npos)
          << text;
      const TensorDesc& db = *d.problem.tensor(TensorId::dbias);
      const int64_t tiles = ((300 + 63) / 64) * (512 / 128) * db.dims[0] * db.dims[1];
      const int64_t rows = 2 * 4 * ((300 + 63) / 64) * 64;
      EXPECT_GE(plan->workspace_bytes(),
                static_cast<size_t>(tiles * (64 * 128 * 4 + 4) + rows * (128 + 2) * 4));
    }
    Problem det = problems[1].problem;  // summed over the batch and the heads of GQA
    det.set_deterministic();
    expect_sm80_serves(det,
                       "tensor 'dbias' dims [1, 1, ...] in deterministic mode with GQA (h_q / "
                       "h_kv = 2): sm90's ordered sum over the heads would serialise each kv "
                       "group behind the previous one (sm80 serves it)");
  }
  // The bias has no room beside d128's 80 rows: forced there, sm90 declines.
  test::ScopedEnv knob("FLOE_SM90_BWD_TILE", "d128");
  auto plan = Plan::build(problems[0].problem, Target::cuda_arch(90));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const EngineVerdict* v = verdict_of(*plan, "sm90");
  ASSERT_NE(v, nullptr);
  EXPECT_FALSE(v->accepted);
  EXPECT_EQ(v->reason,
            "tensor 'bias': backward tile d128 has no room for a bias tile in shared memory "
            "(d128m64 has)");
}

struct Declined {
  std::string name;
  Problem problem;
  std::string reason;
};

std::vector<Declined> declined_problems() {
  std::vector<Declined> out;
  const Shape d128{1, 2, 2, 64, 64, 128, 128};
  out.push_back({"bias softcap sink",
                 Problem::backward(d128, DType::bf16).set_bias(1, 2).set_softcap(30.0).set_sink(),
                 "tensor 'bias' with a softcap: sm90's bias backward has no softcap"});
  out.push_back({"bias d256",
                 Problem::backward(Shape{1, 2, 2, 64, 64, 256, 256}, DType::bf16).set_bias(1, 2),
                 "tensor 'bias': backward tile d256 has no room for a bias tile in shared memory"});
  {
    Problem p = Problem::backward(d128, DType::bf16).set_bias(1, 2);
    p.set_strides(TensorId::dbias, {2 * 64 * 68, 64 * 68, 68, 1});
    out.push_back({"dbias rows not 16-byte aligned", p,
                   "tensor 'dbias' strides[2] = 68: sm90 stores dBias by TMA, which needs the row "
                   "stride a positive multiple of 8 elements (16 bytes) below 2^39"});
  }
  {
    // Rows of 64-element stride but 60 keys: TMA would write the last 16-byte piece whole.
    Problem p = Problem::backward(Shape{1, 2, 2, 64, 60, 128, 128}, DType::bf16).set_bias(1, 2);
    p.set_strides(TensorId::bias, {2 * 64 * 64, 64 * 64, 64, 1});
    p.set_strides(TensorId::dbias, {2 * 64 * 64, 64 * 64, 64, 1});
    out.push_back({"dbias rows of 60 keys", p,
                   "tensor 'dbias' dims[3] = 60: sm90 stores dBias by TMA, which writes whole "
                   "16-byte pieces of a row: s_kv a multiple of 8"});
  }
  out.push_back({"d192", Problem::backward(Shape{1, 2, 2, 64, 64, 192, 192}, DType::bf16),
                 "head dims d_qk = 192, d_v = 192: sm90's backward has tiles for d_qk = d_v = 64, "
                 "128 or 256 and for d_qk 192 / d_v 128 only"});
  {
    Problem p = Problem::backward(d128, DType::bf16);
    p.set_strides(TensorId::d_o, {2 * 64 * 132, 64 * 132, 132, 1});
    out.push_back({"do rows not 16-byte aligned", p,
                   "tensor 'do' strides[2] = 132: sm90's TMA loads need every outer stride a "
                   "positive multiple of 8 elements (16 bytes) below 2^39"});
  }
  {
    Problem p = Problem::backward(Shape{2, 2, 2, 64, 64, 128, 128}, DType::bf16);
    p.set_strides(TensorId::dk, {2 * 64 * 128 + 4, 64 * 128, 128, 1});
    out.push_back({"dk batch stride", p,
                   "tensor 'dk' strides[0] = 16388: sm90 needs every outer stride a multiple of 8 "
                   "elements (16 bytes)"});
  }
  return out;
}

// d256 (the wide kernel, bwd_wide_kernel.cuh): served in both modes (its deterministic mode
// repeated bitwise on the H200 in session 14); the plan names its tile and scheme, or, in the ci
// kernel set, says that the kernel is not built.
TEST(Sm90BwdPlan, D256ServedInBothModes) {
  const Problem p = Problem::backward(Shape{2, 4, 2, 300, 500, 256, 256}, DType::bf16)
                        .set_mask(Mask{MaskAlign::bottom_right, std::nullopt, 0})
                        .set_seq_len_kv();
  Problem det = p;
  det.set_deterministic();
  for (const Problem& problem : {p, det}) {
    SCOPED_TRACE(problem.deterministic() ? "deterministic" : "default");
    auto plan = Plan::build(problem, Target::cuda_arch(90));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    if (!built(p)) {
      const EngineVerdict* v = verdict_of(*plan, "sm90");
      ASSERT_NE(v, nullptr);
      EXPECT_EQ(v->reason, "kernel not built in the ci kernel set (backward tile d256, bf16)");
      continue;
    }
    EXPECT_EQ(plan->engine(), "sm90");
    const std::string text = plan->explain();
    EXPECT_NE(text.find("sm90_bwd_d256_bf16: tile d256, 64 keys per CTA x 64-query visits"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("both consumer warpgroups on the keys, d split between them"),
              std::string::npos)
        << text;
    EXPECT_EQ(text.find("; deterministic:") != std::string::npos, problem.deterministic()) << text;
  }
}

TEST(Sm90BwdPlan, DeclinesWithTheExactReasonAndAnotherEngineServes) {
  for (const Declined& d : declined_problems()) {
    SCOPED_TRACE(d.name);
    auto plan = Plan::build(d.problem, Target::cuda_arch(90));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_NE(plan->engine(), "sm90") << plan->explain();
    const EngineVerdict* v = verdict_of(*plan, "sm90");
    ASSERT_NE(v, nullptr);
    EXPECT_FALSE(v->accepted);
    EXPECT_EQ(v->reason, d.reason);
  }
}

}  // namespace
}  // namespace floe
