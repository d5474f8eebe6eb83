// The small tensors through strides (issue 11, item 4): sink, dsink, seq_len_q and seq_len_kv
// are vectors over the head or the batch, and an engine that reads them as if packed computes
// with the wrong sinks and lengths without a word. Each direction runs with every one of them at
// a stride above 1 (the gaps poisoned by the buffers), lengths and sinks different per batch and
// per head, on the engine under test, against the reference engine on the same layout.
#include <string>

#include "support/harness_expect.h"
#include "support/harness_gpu_test.h"
#include "support/harness_random_problem.h"
#include "support/harness_runner.h"

namespace floe::test {
namespace {

class StridedVectors : public GpuTest {};

nlohmann::json problem_json(Direction dir, int64_t d, bool causal) {
  nlohmann::json j = {{"op", dir == Direction::forward ? "fwd" : "bwd"},
                      {"dtype", "bf16"},
                      {"b", 3},
                      {"h_q", 4},
                      {"h_kv", 2},
                      {"s_q", 150},
                      {"s_kv", 200},
                      {"d_qk", d},
                      {"d_v", d},
                      {"sink", true},
                      {"seq_len_q", {150, 37, 1}},
                      {"seq_len_kv", {200, 64, 131}}};
  if (dir == Direction::forward) j["stats"] = true;
  if (causal) j["mask"] = {{"align", "bottom_right"}, {"right", 0}};
  return j;
}

void run_strided(Direction dir) {
  const std::string engine = harness_settings().engine;
  int checked = 0;
  for (int64_t d : {64, 128}) {
    for (bool causal : {false, true}) {
      const std::string name = std::string(dir == Direction::forward ? "fwd" : "bwd") +
                               "-strided-vectors-d" + std::to_string(d) + (causal ? "-causal" : "");
      SCOPED_TRACE(name);
      Result<tool::Case> c = make_case(problem_json(dir, d, causal), 71);
      FLOE_ASSERT_OK(c);
      c->problem.set_strides(TensorId::sink, {3});
      c->problem.set_strides(TensorId::seq_len_q, {2});
      c->problem.set_strides(TensorId::seq_len_kv, {5});
      if (dir == Direction::backward) c->problem.set_strides(TensorId::dsink, {2});
      Result<Plan> plan = build_plan(c->problem, tool::Memory::device, engine);
      if (declined_by_pinned_engine(plan)) continue;
      FLOE_ASSERT_OK(plan);
      Result<tool::ArrayMap> got = run_once(*c, tool::Memory::device, engine);
      FLOE_ASSERT_OK(got);
      expect_matches_reference(name, *c, *got);
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "engine " << engine << " declined every problem";
}

TEST_F(StridedVectors, Forward) {
  run_strided(Direction::forward);
}
TEST_F(StridedVectors, Backward) {
  run_strided(Direction::backward);
}

}  // namespace
}  // namespace floe::test
