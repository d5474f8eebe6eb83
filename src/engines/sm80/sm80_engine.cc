// The sm80 engine: fused attention on Ampere-class tensor cores (sm_80 to sm_90). The forward
// and backward each plan in their own file (fwd_plan.cc, bwd_plan.cc; ragged sides and paged
// K/V in serving_plan.cc); this is the dispatch.
#include "engines/sm80/sm80_engine.h"

#include "engines/sm80/bwd_plan.h"
#include "engines/sm80/fwd_plan.h"

namespace floe::detail {
namespace {

class Sm80Engine final : public Engine {
 public:
  const char* name() const override { return "sm80"; }

  std::string decline_reason(const Facts& facts, const Target& target) const override {
    return facts.backward() ? sm80::backward_decline_reason(facts, target)
                            : sm80::forward_decline_reason(facts, target);
  }

  Result<std::unique_ptr<const LaunchPlan>> plan(const Facts& facts, const Target& target,
                                                 WorkspaceLayout& workspace) const override {
    return facts.backward() ? sm80::plan_backward(facts, target, workspace)
                            : sm80::plan_forward(facts, target);
  }
};

}  // namespace

const Engine& sm80_engine() {
  static const Sm80Engine engine;
  return engine;
}

}  // namespace floe::detail
