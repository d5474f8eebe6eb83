// sm90 backward planning: whether sm90 serves a backward problem (and why not), and the plan
// that launches it. Host code.
#pragma once

#include <memory>
#include <string>

#include "engines/engine.h"

namespace floe::detail::sm90 {

// Empty when sm90's backward serves the problem on the target; else why not.
std::string backward_decline_reason(const Facts& facts, const Target& target);
// Only after an empty reason. Adds its workspace chunks to `workspace`.
Result<std::unique_ptr<const LaunchPlan>> plan_backward(const Facts& facts, const Target& target,
                                                        WorkspaceLayout& workspace);

}  // namespace floe::detail::sm90
