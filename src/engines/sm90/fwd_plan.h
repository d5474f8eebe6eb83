// sm90 forward planning: whether sm90 serves a forward problem (and why not), and the plan that
// launches it. Host code.
#pragma once

#include <memory>
#include <string>

#include "engines/engine.h"

namespace floe::detail::sm90 {

// Empty when sm90's forward serves the problem on the target; else why not.
std::string forward_decline_reason(const Facts& facts, const Target& target);
// Only after an empty reason. Needs no workspace.
Result<std::unique_ptr<const LaunchPlan>> plan_forward(const Facts& facts, const Target& target);

}  // namespace floe::detail::sm90
