// The sm90 engine: the forward plans in fwd_plan.cc, the backward in bwd_plan.cc; this is the
// dispatch.
#include "engines/sm90/sm90_engine.h"

#include "engines/sm90/bwd_plan.h"
#include "engines/sm90/fwd_plan.h"

namespace floe::detail {
namespace {

class Sm90Engine final : public Engine {
 public:
  const char* name() const override { return "sm90"; }

  std::string decline_reason(const Facts& facts, const Target& target) const override {
    // Ragged forwards take the serving kernel (fwd_plan.cc, which declines paged K/V by name); the
    // backward serves dense problems only.
    if (facts.backward()) {
      if (std::string why = serving_decline_reason(facts, "sm90's backward"); !why.empty()) {
        return why;
      }
      return sm90::backward_decline_reason(facts, target);
    }
    return sm90::forward_decline_reason(facts, target);
  }

  Result<std::unique_ptr<const LaunchPlan>> plan(const Facts& facts, const Target& target,
                                                 WorkspaceLayout& workspace) const override {
    if (facts.backward()) return sm90::plan_backward(facts, target, workspace);
    return sm90::plan_forward(facts, target);
  }
};

}  // namespace

const Engine& sm90_engine() {
  static const Sm90Engine engine;
  return engine;
}

}  // namespace floe::detail
