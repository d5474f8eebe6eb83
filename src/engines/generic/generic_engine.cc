#include "engines/generic/generic_engine.h"

#include <memory>

#include "engines/generic/generic_kernels.h"
#include "engines/generic/generic_launch_plan.h"

namespace floe::detail {
namespace {

class GenericEngine final : public Engine {
 public:
  const char* name() const override { return "generic"; }
  std::string decline_reason(const Facts& facts, const Target& target) const override {
    return generic::decline_reason(facts, target);
  }
  Result<std::unique_ptr<const LaunchPlan>> plan(const Facts& facts, const Target& target,
                                                 WorkspaceLayout& workspace) const override {
    const generic::Params params = generic::make_params(facts);
    const generic::Geometry geometry = generic::make_geometry(facts, params);
    generic::add_workspace(facts, workspace);
    if (target.executable) {
      const Status loaded = facts.backward() ? generic::load_backward_kernels(geometry)
                                             : generic::load_forward_kernels(params, geometry);
      if (!loaded) return loaded;
    }
    return std::unique_ptr<const LaunchPlan>(
        std::make_unique<generic::GenericLaunchPlan>(params, geometry));
  }
};

}  // namespace

const Engine& generic_engine() {
  static const GenericEngine engine;
  return engine;
}

}  // namespace floe::detail
