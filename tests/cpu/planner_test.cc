// The planner: ranking, pinning, decline reasons, explain(), routing by architecture with no
// GPU present, and the workspace layout contract (P3).
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "floe/floe.h"
#include "engines/workspace.h"

namespace floe {
namespace {

Problem small_fwd() {
  return Problem::forward(Shape{2, 4, 2, 33, 47, 64, 32}, DType::f16);
}
Problem small_bwd() {
  return Problem::backward(Shape{2, 4, 2, 33, 47, 64, 32}, DType::bf16).set_bias(1, 4).set_sink();
}

TEST(Planner, RegistryRanksGpuEnginesBeforeTheReference) {
  const std::vector<std::string> names = engine_names();
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names.back(), "reference");
  EXPECT_EQ(names[names.size() - 2], "generic");
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
}

TEST(Planner, CpuTargetChoosesTheReference) {
  for (const Problem& p : {small_fwd(), small_bwd()}) {
    auto plan = Plan::build(p, Target::cpu(2));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_EQ(plan->engine(), "reference");
    EXPECT_EQ(plan->explain().rfind("engine: reference\n", 0), 0u) << plan->explain();
  }
}

TEST(Planner, ArchitectureTargetsRouteWithoutAGpu) {
  for (int arch : {80, 86, 89, 90}) {
    for (const Problem& p : {small_fwd(), small_bwd()}) {
      auto plan = Plan::build(p, Target::cuda_arch(arch));
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      EXPECT_NE(plan->engine(), "reference");
      // Such a plan explains itself but cannot run.
      const Status st = plan->execute(Arguments{}, nullptr, 0);
      EXPECT_EQ(st.code(), Code::not_supported);
      EXPECT_NE(st.message().find("without a device"), std::string::npos) << st.message();
    }
  }
}

TEST(Planner, ExplainListsEveryEngineWithItsVerdict) {
  auto plan = Plan::build(small_fwd(), Target::cuda_arch(90));
  ASSERT_TRUE(plan.ok());
  const std::string text = plan->explain();
  EXPECT_EQ(text.rfind("engine: " + plan->engine() + "\n", 0), 0u) << text;
  for (const std::string& name : engine_names()) {
    EXPECT_NE(text.find("  " + name + ": "), std::string::npos) << text;
  }
  EXPECT_NE(text.find("  reference: declined: runs on the CPU only"), std::string::npos) << text;
  ASSERT_EQ(plan->verdicts().size(), engine_names().size());
}

TEST(Planner, PinnedEngineMustAccept) {
  auto cpu_generic = Plan::build(small_fwd(), Target::cpu(1), PlanOptions{"generic"});
  ASSERT_FALSE(cpu_generic.ok());
  EXPECT_EQ(cpu_generic.status().code(), Code::not_supported);
  EXPECT_NE(cpu_generic.status().message().find("generic: declined: runs on CUDA devices only"),
            std::string::npos)
      << cpu_generic.status().message();

  auto unknown = Plan::build(small_fwd(), Target::cpu(1), PlanOptions{"warp9"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("'warp9' is not an engine"), std::string::npos);

  auto pinned = Plan::build(small_fwd(), Target::cuda_arch(80), PlanOptions{"generic"});
  ASSERT_TRUE(pinned.ok()) << pinned.status().message();
  EXPECT_EQ(pinned->engine(), "generic");
}

TEST(Planner, InvalidProblemIsRefusedBeforeAnyEngineIsAsked) {
  auto plan =
      Plan::build(Problem::forward(Shape{1, 3, 2, 8, 8, 8, 8}, DType::f16), Target::cuda_arch(90));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Code::invalid_problem);
}

TEST(Planner, EmptyPlanIsHarmless) {
  Plan plan;
  EXPECT_EQ(plan.workspace_bytes(), 0u);
  EXPECT_EQ(plan.explain(), "engine: none\n");
  EXPECT_EQ(plan.execute(Arguments{}, nullptr, 0).code(), Code::invalid_argument);
}

TEST(WorkspaceLayout, ChunksAreNamedAlignedAndPacked) {
  detail::WorkspaceLayout layout;
  layout.add("delta", 100);
  layout.add("empty", 0);
  layout.add("dq_accum", 256);
  layout.add("sem", 4);
  const auto& c = layout.chunks();
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].offset, 0u);
  EXPECT_EQ(c[0].bytes, 100u);
  EXPECT_EQ(c[1].offset, 256u);
  EXPECT_EQ(c[2].offset, 256u);  // an empty chunk takes no room
  EXPECT_EQ(c[3].offset, 512u);
  EXPECT_EQ(layout.total_bytes(), 768u);
  for (const auto& chunk : c) EXPECT_EQ(chunk.offset % kWorkspaceAlignment, 0u);
  EXPECT_THROW(layout.add("delta", 8), std::logic_error);

  alignas(256) static char buffer[768];
  detail::Workspace ws(buffer, layout.chunks());
  EXPECT_EQ(ws.carve<char>("dq_accum"), buffer + 256);
  EXPECT_EQ(ws.carve<char>("sem"), buffer + 512);
  EXPECT_EQ(ws.bytes_of("delta"), 100u);
  EXPECT_EQ(ws.carve("nothing"), nullptr);
}

TEST(Target, ArchitectureTargetsCarryReferenceProperties) {
  const Target h = Target::cuda_arch(90);
  EXPECT_EQ(h.kind, Target::Kind::cuda);
  EXPECT_FALSE(h.executable);
  EXPECT_EQ(h.sm_count, 132);
  const Target a = Target::cuda_arch(80);
  EXPECT_EQ(a.sm_count, 108);
  EXPECT_GE(Target::cpu().cpu_threads, 1);
  EXPECT_EQ(Target::cpu(3).cpu_threads, 3);
}

}  // namespace
}  // namespace floe
