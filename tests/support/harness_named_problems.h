// A few fixed problems that together touch every feature, for the GPU tests that need a
// known problem rather than a random one (detectors, graphs, streams, determinism,
// validation). Each is a problem.json (DESIGN §4), so a failure writes a case folder.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "floe/problem.h"

namespace floe::test {

struct NamedProblem {
  std::string name;
  nlohmann::json json;
};

// A problem.json with the shape and nothing optional.
nlohmann::json problem_json(Direction direction, const char* dtype, int64_t b, int64_t h_q,
                            int64_t h_kv, int64_t s_q, int64_t s_kv, int64_t d_qk, int64_t d_v);

// plain; GQA causal bottom-right with stats; MQA with a bias broadcast over b, sink, softcap,
// sliding window and padding with a zero length; strided [B, S, H, D] layouts with gaps on
// every tensor; a band with a bias broadcast over heads, custom scale, padding.
std::vector<NamedProblem> named_problems(Direction direction);

// The same with "deterministic": true.
std::vector<NamedProblem> deterministic_problems(Direction direction);

}  // namespace floe::test
