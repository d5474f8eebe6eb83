#include "engines/generic/generic_engine.h"

#include <memory>

#include "engines/generic/generic_launch_plan.h"

namespace floe::detail {
namespace {

class GenericEngine final : public Engine {
 public:
  const char* name() const override { return "generic"; }
  std::string decline_reason(const Facts& facts, const Target& target) const override {
    return generic::decline_reason(facts, target);
  }
  std::unique_ptr<const LaunchPlan> plan(const Facts& facts, const Target&,
                                         WorkspaceLayout& workspace) const override {
    const generic::Params params = generic::make_params(facts);
    const generic::Geometry geometry = generic::make_geometry(facts, params);
    generic::add_workspace(facts, workspace);
    return std::make_unique<generic::GenericLaunchPlan>(params, geometry);
  }
};

}  // namespace

const Engine& generic_engine() {
  static const GenericEngine engine;
  return engine;
}

}  // namespace floe::detail
