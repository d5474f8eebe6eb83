#include "engines/reference/reference_engine.h"

namespace floe::detail {
namespace {

class ReferenceEngine final : public Engine {
 public:
  const char* name() const override { return "reference"; }
  std::string decline_reason(const Facts&, const Target& target) const override {
    if (target.kind != Target::Kind::cpu) return "runs on the CPU only";
    return "";
  }
  std::unique_ptr<const LaunchPlan> plan(const Facts&, const Target&,
                                         WorkspaceLayout&) const override {
    return nullptr;  // TODO
  }
};

}  // namespace

const Engine& reference_engine() {
  static const ReferenceEngine engine;
  return engine;
}

}  // namespace floe::detail
