// What every engine is: a name, a verdict on a problem, and a plan that launches. The contract
// engines implement lives here, beside them: Facts (facts.h), what a validated problem needs, and
// the workspace (workspace.h). The planner (src/plan/) includes the engines, never the reverse;
// it asks each one the same questions.
#pragma once

#include <memory>
#include <string>

#include "engines/facts.h"
#include "engines/workspace.h"
#include "floe/plan.h"

namespace floe::detail {

// What an engine decided at build: launch geometry and kernel choice live in subclasses.
class LaunchPlan {
 public:
  virtual ~LaunchPlan() = default;
  // Runs the problem. Arguments and workspace were checked by the caller. Must not allocate
  // or synchronise (P2). Pure host work per call is allowed: e.g. encoding TMA descriptors,
  // which hold this call's base pointers, into the kernel's __grid_constant__ params.
  virtual Status launch(const Facts& facts, const Arguments& args, const Workspace& ws,
                        Stream stream) const = 0;
  // The alignment, in bytes, the kernels need of a tensor's base pointer.
  virtual size_t pointer_alignment(TensorId id, const Facts& facts) const;
  // What explain() says of the plan beyond the engine's name (kernel, tile); empty: nothing.
  virtual std::string describe() const { return ""; }
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const char* name() const = 0;
  // Empty when the engine serves this problem on this target; else why not, naming the
  // tensor or feature.
  virtual std::string decline_reason(const Facts& facts, const Target& target) const = 0;
  // Only called after an empty decline_reason. Adds the engine's workspace chunks. Fails only
  // for what the device says at plan time (loading a kernel, opting into shared memory), so
  // that such a failure surfaces at build, never at execute.
  virtual Result<std::unique_ptr<const LaunchPlan>> plan(const Facts& facts, const Target& target,
                                                         WorkspaceLayout& workspace) const = 0;
};

}  // namespace floe::detail
