// The generic engine's LaunchPlan: kernel arguments and launch geometry decided at build (P1);
// launch() fills in the pointers, carves the workspace and launches (P2).
#pragma once

#include <string>

#include "engines/engine.h"
#include "engines/generic/generic_params.h"

namespace floe::detail::generic {

// Workspace chunks (P3). Backward only: "delta", f32 [b, h_q, s_q] dense, 4*b*h_q*s_q bytes.
inline constexpr const char* kDeltaChunk = "delta";

// Why the generic engine cannot serve this problem on this target; empty when it can.
std::string decline_reason(const Facts& facts, const Target& target);

// Kernel arguments (pointers left null) and geometry for an accepted problem.
Params make_params(const Facts& facts);
Geometry make_geometry(const Facts& facts, const Params& params);
// Adds the workspace chunks the kernels carve.
void add_workspace(const Facts& facts, WorkspaceLayout& workspace);

class GenericLaunchPlan final : public LaunchPlan {
 public:
  GenericLaunchPlan(const Params& params, const Geometry& geometry)
      : params_(params), geometry_(geometry) {}

  Status launch(const Facts& facts, const Arguments& args, const Workspace& ws,
                Stream stream) const override;

  const Params& params() const { return params_; }
  const Geometry& geometry() const { return geometry_; }

 private:
  Params params_;
  Geometry geometry_;
};

}  // namespace floe::detail::generic
