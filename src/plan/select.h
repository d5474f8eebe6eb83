// Selection: ask every registered engine, fastest first, and keep the first that accepts.
#pragma once

#include <string>
#include <vector>

#include "engines/engine.h"

namespace floe::detail {

// Fastest first. generic serves any valid problem on a GPU, reference any on the CPU (P5).
const std::vector<const Engine*>& ranked_engines();

struct Selection {
  const Engine* engine = nullptr;  // null: none accepted
  std::vector<EngineVerdict> verdicts;
};

// `pinned` is "auto" or an engine name; a pinned engine is the only one that may be chosen.
Selection select_engine(const Facts& facts, const Target& target, const std::string& pinned);

}  // namespace floe::detail
