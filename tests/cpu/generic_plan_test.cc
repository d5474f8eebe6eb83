// The generic engine's planning, without a GPU: it accepts every valid problem on sm_80 and
// sm_90 (forward and backward, every feature), declines the CPU and pre-Ampere targets with
// its reason, and lays out exactly the workspace it documents: nothing for the forward, one
// 256-aligned chunk "delta" of 4 * b * h_q * s_q bytes (f32 [b, h_q, s_q]) for the backward.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "floe/floe.h"
#include "support/plan_verdicts.h"

namespace floe {
namespace {

using test::verdict_of;

PlanOptions pinned() {
  PlanOptions o;
  o.engine = "generic";
  return o;
}

struct Named {
  std::string name;
  Problem problem;
};

// Problems across every axis of DESIGN §2, forward and backward.
std::vector<Named> problems() {
  std::vector<Named> out;
  auto add = [&](std::string name, Problem p) { out.push_back({std::move(name), std::move(p)}); };
  for (Direction dir : {Direction::forward, Direction::backward}) {
    const bool bwd = dir == Direction::backward;
    const std::string tag = bwd ? "bwd " : "fwd ";
    auto make = [&](const Shape& s, DType t) {
      return bwd ? Problem::backward(s, t) : Problem::forward(s, t);
    };
    add(tag + "d128 bf16", make(Shape{2, 16, 16, 1024, 1024, 128, 128}, DType::bf16));
    add(tag + "d64 f16 causal", make(Shape{4, 8, 8, 512, 512, 64, 64}, DType::f16).set_causal());
    add(tag + "d1 tiny", make(Shape{1, 1, 1, 1, 1, 1, 1}, DType::bf16));
    add(tag + "d256/d96", make(Shape{1, 4, 2, 300, 200, 256, 96}, DType::f16));
    add(tag + "d320 odd", make(Shape{1, 2, 2, 65, 129, 320, 33}, DType::bf16));
    add(tag + "gqa 16:2", make(Shape{2, 16, 2, 256, 256, 128, 128}, DType::bf16));
    add(tag + "mqa 8:1 decode", make(Shape{8, 8, 1, 1, 4096, 64, 64}, DType::f16));
    add(tag + "window bottom-right", make(Shape{1, 8, 8, 100, 300, 128, 128}, DType::bf16)
                                         .set_window(64, 0, MaskAlign::bottom_right));
    add(tag + "negative band",
        make(Shape{1, 2, 2, 64, 64, 64, 64}, DType::bf16).set_window(-3, 10));
    add(tag + "padding",
        make(Shape{3, 4, 4, 200, 300, 64, 64}, DType::bf16).set_seq_len_q().set_seq_len_kv());
    add(tag + "bias [1, 1]", make(Shape{2, 4, 4, 128, 96, 64, 64}, DType::bf16).set_bias(1, 1));
    add(tag + "bias [B, Hq]", make(Shape{2, 4, 2, 128, 96, 64, 64}, DType::f16).set_bias(2, 4));
    add(tag + "sink softcap",
        make(Shape{2, 8, 8, 128, 128, 128, 128}, DType::bf16).set_sink().set_softcap(30.0));
    add(tag + "scale", make(Shape{1, 2, 2, 64, 64, 128, 128}, DType::bf16).set_scale(-0.3));
    add(tag + "deterministic",
        make(Shape{1, 2, 2, 64, 64, 64, 64}, DType::f16).set_deterministic());
    {
      // BSHD layout, stats [B, S, H].
      const int64_t b = 2, h = 8, s = 512, d = 128;
      Problem p = make(Shape{b, h, h, s, s, d, d}, DType::bf16);
      std::vector<TensorId> ids = {TensorId::q, TensorId::k, TensorId::v, TensorId::o};
      if (bwd) ids.insert(ids.end(), {TensorId::d_o, TensorId::dq, TensorId::dk, TensorId::dv});
      for (TensorId id : ids) p.set_strides(id, {s * h * d, d, h * d, 1});
      if (!bwd) p.set_stats();
      p.set_strides(TensorId::stats, {s * h, 1, h});
      add(tag + "bshd", std::move(p));
    }
    {
      // Transposed K and V ([B, H, D, S] in memory), zero-stride broadcast of Q over heads.
      const int64_t s = 100, d = 64;
      Problem p = make(Shape{2, 4, 4, s, s, d, d}, DType::f16);
      p.set_strides(TensorId::k, {4 * d * s, d * s, 1, s});
      p.set_strides(TensorId::v, {4 * d * s, d * s, 1, s});
      p.set_strides(TensorId::q, {s * d, 0, d, 1});
      add(tag + "transposed kv, broadcast q", std::move(p));
    }
  }
  return out;
}

TEST(GenericPlan, AcceptsEveryProblemOnAmpereAndHopper) {
  for (int arch : {80, 90}) {
    for (const Named& n : problems()) {
      SCOPED_TRACE(n.name + " on sm_" + std::to_string(arch));
      Result<Plan> plan = Plan::build(n.problem, Target::cuda_arch(arch), pinned());
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      EXPECT_EQ(plan->engine(), "generic");
      const EngineVerdict* v = verdict_of(*plan, "generic");
      ASSERT_NE(v, nullptr);
      EXPECT_TRUE(v->accepted) << v->reason;
      EXPECT_EQ(v->reason, "");
    }
  }
}

TEST(GenericPlan, AcceptedUnderAutoWhenFasterEnginesDecline) {
  // With "auto", generic is accepted on every CUDA target (another engine may rank first).
  for (const Named& n : problems()) {
    SCOPED_TRACE(n.name);
    Result<Plan> plan = Plan::build(n.problem, Target::cuda_arch(90));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    const EngineVerdict* v = verdict_of(*plan, "generic");
    ASSERT_NE(v, nullptr);
    EXPECT_TRUE(v->accepted) << v->reason;
  }
}

TEST(GenericPlan, WorkspaceIsExactlyTheDocumentedChunks) {
  for (const Named& n : problems()) {
    SCOPED_TRACE(n.name);
    Result<Plan> plan = Plan::build(n.problem, Target::cuda_arch(80), pinned());
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    const TensorDesc& q = *n.problem.tensor(TensorId::q);
    const int64_t b = q.dims[0], h_q = q.dims[1], s_q = q.dims[2];
    const auto& chunks = plan->workspace_chunks();
    if (n.problem.direction() == Direction::forward) {
      EXPECT_TRUE(chunks.empty());
      EXPECT_EQ(plan->workspace_bytes(), 0u);
      continue;
    }
    ASSERT_EQ(chunks.size(), 1u);
    EXPECT_EQ(chunks[0].name, "delta");
    EXPECT_EQ(chunks[0].offset, 0u);
    EXPECT_EQ(chunks[0].bytes, static_cast<size_t>(4 * b * h_q * s_q));
    size_t end = 0;
    for (const WorkspaceChunk& c : chunks) {
      EXPECT_FALSE(c.name.empty());
      EXPECT_EQ(c.offset % kWorkspaceAlignment, 0u) << c.name;
      EXPECT_GE(c.offset, end) << c.name << " overlaps the chunk before it";
      end = c.offset + c.bytes;
    }
    EXPECT_GE(plan->workspace_bytes(), end);
    EXPECT_EQ(plan->workspace_bytes() % kWorkspaceAlignment, 0u);
    EXPECT_LT(plan->workspace_bytes() - end, kWorkspaceAlignment);
  }
}

TEST(GenericPlan, WorkspaceIsLinearInSequenceLength) {
  // O(B * H * S), never O(S^2).
  Result<Plan> small =
      Plan::build(Problem::backward(Shape{2, 4, 4, 1024, 1024, 64, 64}, DType::bf16),
                  Target::cuda_arch(90), pinned());
  Result<Plan> big = Plan::build(Problem::backward(Shape{2, 4, 4, 8192, 8192, 64, 64}, DType::bf16),
                                 Target::cuda_arch(90), pinned());
  ASSERT_TRUE(small.ok() && big.ok());
  EXPECT_EQ(big->workspace_bytes(), 8 * small->workspace_bytes());
}

TEST(GenericPlan, DeclinesTheCpuWithItsReason) {
  for (const Named& n : problems()) {
    SCOPED_TRACE(n.name);
    Result<Plan> plan = Plan::build(n.problem, Target::cpu(1), pinned());
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), Code::not_supported);
    EXPECT_NE(plan.status().message().find("generic: declined: runs on CUDA devices only"),
              std::string::npos)
        << plan.status().message();

    Result<Plan> any = Plan::build(n.problem, Target::cpu(1));
    ASSERT_TRUE(any.ok()) << any.status().message();
    EXPECT_NE(any->engine(), "generic");
    const EngineVerdict* v = verdict_of(*any, "generic");
    ASSERT_NE(v, nullptr);
    EXPECT_FALSE(v->accepted);
    EXPECT_EQ(v->reason, "runs on CUDA devices only");
    EXPECT_NE(any->explain().find("  generic: declined: runs on CUDA devices only\n"),
              std::string::npos);
  }
}

TEST(GenericPlan, DeclinesPreAmpereWithItsReason) {
  Result<Plan> plan = Plan::build(Problem::forward(Shape{1, 2, 2, 64, 64, 64, 64}, DType::f16),
                                  Target::cuda_arch(75), pinned());
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("needs compute capability 8.0 or newer (target is sm_75)"),
            std::string::npos)
      << plan.status().message();
}

TEST(GenericPlan, PlannedWithoutADeviceCannotExecute) {
  Result<Plan> plan = Plan::build(Problem::forward(Shape{1, 2, 2, 64, 64, 64, 64}, DType::bf16),
                                  Target::cuda_arch(80), pinned());
  ASSERT_TRUE(plan.ok());
  Arguments args;
  const Status st = plan->execute(args, nullptr, 0);
  EXPECT_FALSE(st.ok());
}

}  // namespace
}  // namespace floe
