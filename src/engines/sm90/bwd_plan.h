// sm90 backward planning: whether sm90 serves a backward problem (and why not), and the plan
// that launches it. Host code.
#pragma once

#include <memory>
#include <string>

#include "engines/engine.h"
#include "engines/sm90/bwd_params.h"

namespace floe::detail::sm90 {

// Empty when sm90's backward serves the problem on the target; else why not.
std::string backward_decline_reason(const Facts& facts, const Target& target);
// Only after an empty reason. Adds its workspace chunks to `workspace`.
Result<std::unique_ptr<const LaunchPlan>> plan_backward(const Facts& facts, const Target& target,
                                                        WorkspaceLayout& workspace);
// The main kernel's Params as plan_backward() builds them, before launch() fills in the pointers
// and tensor maps (the bias steps included; dbias_sem and dq_sem then say only whether they are
// set, pointing nowhere): for tests that replay the grid's protocols on the host.
Result<BwdParams> backward_params(const Facts& facts, const Target& target);

}  // namespace floe::detail::sm90
