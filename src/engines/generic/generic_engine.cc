#include "engines/generic/generic_engine.h"

namespace floe::detail {
namespace {

class GenericEngine final : public Engine {
 public:
  const char* name() const override { return "generic"; }
  std::string decline_reason(const Facts&, const Target& target) const override {
    if (target.kind != Target::Kind::cuda) return "runs on CUDA devices only";
    return "";
  }
  std::unique_ptr<const LaunchPlan> plan(const Facts&, const Target&,
                                         WorkspaceLayout&) const override {
    return nullptr;  // TODO
  }
};

}  // namespace

const Engine& generic_engine() {
  static const GenericEngine engine;
  return engine;
}

}  // namespace floe::detail
