// sm80 backward planning: whether sm80 serves a backward problem (and why not), its workspace
// chunks, and the plan that launches it. Host code.
#pragma once

#include <memory>
#include <string>

#include "engines/engine.h"

namespace floe::detail::sm80 {

// Empty when sm80's backward serves the problem on the target; else why not.
std::string backward_decline_reason(const Facts& facts, const Target& target);
// Only after an empty reason. Adds the workspace chunks (dq_accum, lse_log2, delta, and
// dq_semaphore when deterministic).
Result<std::unique_ptr<const LaunchPlan>> plan_backward(const Facts& facts, const Target& target,
                                                        WorkspaceLayout& workspace);

}  // namespace floe::detail::sm80
