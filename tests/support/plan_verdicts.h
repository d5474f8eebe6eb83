// What the planner said of one engine, for the planning tests that check each engine's verdict.
#pragma once

#include <string>

#include "floe/plan.h"

namespace floe::test {

// The verdict `engine` gave on `plan`'s problem, or nullptr when the engine is not in the list.
inline const EngineVerdict* verdict_of(const Plan& plan, const std::string& engine) {
  for (const EngineVerdict& v : plan.verdicts()) {
    if (v.engine == engine) return &v;
  }
  return nullptr;
}

}  // namespace floe::test
