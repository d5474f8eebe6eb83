// The generic engine's LaunchPlan: kernel arguments and launch geometry decided at build (P1);
// launch() fills in the pointers, carves the workspace and launches (P2).
#pragma once

#include <string>

#include "engines/engine.h"
#include "engines/generic/generic_params.h"
#include "kernels/constants.h"

namespace floe::detail::generic {

// Workspace chunks (P3). Backward only: "delta", f32 [b, h_q, s_q] dense, 4*b*h_q*s_q bytes.
inline constexpr const char* kDeltaChunk = "delta";

// Why the generic engine cannot serve this problem on this target; empty when it can.
std::string decline_reason(const Facts& facts, const Target& target);

// The sizes and the score fields of a CUDA-core engine's params (generic's and decode's: the
// same names, each with its own integer type), read by their kernels alike.
template <class P>
void set_problem_fields(const Facts& f, P& p) {
  using Int = decltype(p.b);
  fill_sizes(f, p);
  p.d_qk = static_cast<Int>(f.d_qk);
  p.d_v = static_cast<Int>(f.d_v);
  p.scale = static_cast<float>(f.scale);
  p.scale_log2 = static_cast<float>(f.scale * kernels::kLog2eOf<double>);
  p.has_softcap = f.has_softcap;
  p.softcap = static_cast<float>(f.softcap);
  p.inv_softcap = f.has_softcap ? static_cast<float>(1.0 / f.softcap) : 0.f;
  p.has_sink = f.has(TensorId::sink);
  p.has_stats = f.has(TensorId::stats);
  p.band = kernels::BandMask::from(f.mask);
}

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
