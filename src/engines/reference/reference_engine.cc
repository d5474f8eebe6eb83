// The reference engine's verdict and plan: any valid problem on the CPU; the plan fixes the
// thread count and the workspace (per-thread fp64 rows, and the backward's Delta per row).
#include "engines/reference/reference_engine.h"

#include <algorithm>

#include "engines/reference/reference_parallel.h"
#include "engines/reference/reference_passes.h"

namespace floe::detail {
namespace {

class ReferenceLaunch final : public LaunchPlan {
 public:
  explicit ReferenceLaunch(int threads) : threads_(threads) {}

  Status launch(const Facts& facts, const Arguments& args, const Workspace& ws,
                Stream) const override {
    const reference::Operands ops(facts, args);
    if (facts.backward()) {
      reference::run_backward(ops, ws, threads_);
    } else {
      reference::run_forward(ops, ws, threads_);
    }
    return Status();
  }

 private:
  int threads_;
};

class ReferenceEngine final : public Engine {
 public:
  const char* name() const override { return "reference"; }
  std::string decline_reason(const Facts&, const Target& target) const override {
    if (target.kind != Target::Kind::cpu) return "runs on the CPU only";
    return "";
  }
  Result<std::unique_ptr<const LaunchPlan>> plan(const Facts& facts, const Target& target,
                                                 WorkspaceLayout& workspace) const override {
    const int threads = std::clamp(target.cpu_threads, 1, reference::kMaxThreads);
    const int64_t per_thread = facts.backward() ? reference::backward_scratch_doubles(facts)
                                                : reference::forward_scratch_doubles(facts);
    const int64_t f64 = sizeof(double);
    workspace.add(reference::kRowScratch, detail::saturating_bytes({f64, threads, per_thread}));
    if (facts.backward()) {
      // One per query-side item: (b, h, i) dense, (token, h) ragged.
      const int64_t rows = facts.ragged_q ? facts.total_q : facts.b * facts.s_q;
      workspace.add(reference::kDelta, detail::saturating_bytes({f64, rows, facts.h_q}));
    }
    return std::unique_ptr<const LaunchPlan>(std::make_unique<ReferenceLaunch>(threads));
  }
};

}  // namespace

const Engine& reference_engine() {
  static const ReferenceEngine engine;
  return engine;
}

}  // namespace floe::detail
