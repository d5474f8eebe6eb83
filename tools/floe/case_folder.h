// Case folders (DESIGN §4): problem.json plus logical float32 .npy inputs; outputs go to
// CASE/out/. Shared by the command line and the GPU tests, which write a case folder for
// every failure so that `floe run --device cuda` reproduces it.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "floe/plan.h"
#include "floe/problem.h"
#include "npy.h"

namespace floe::tool {

using ArrayMap = std::map<std::string, HostArray>;  // by case name: q k v bias sink o do stats ...

// problem.json <-> Problem. Errors name the key and the rule.
Result<Problem> problem_from_json(const nlohmann::json& json);

struct Case {
  std::string dir;
  nlohmann::json json;
  Problem problem = Problem::forward(Shape{}, DType::bf16);
  ArrayMap inputs;
};

// The inputs the problem needs, by case name: q k v [bias] [sink] [seq_len_q] [seq_len_kv]
// (the sequence lengths live in problem.json; read_case puts them here as arrays);
// backward also o do stats.
std::vector<std::string> input_names(const Problem& problem);
// The outputs: forward o [stats]; backward dq dk dv [dbias] [dsink].
std::vector<std::string> output_names(const Problem& problem);
// The TensorId of a case name ("do" -> d_o, ...).
TensorId tensor_of(const std::string& name);

Result<Case> read_case(const std::string& dir);
// Writes problem.json and the inputs; creates the folder.
Status write_case(const std::string& dir, const nlohmann::json& json, const ArrayMap& inputs);

struct RunResult {
  std::string engine;
  size_t workspace_bytes = 0;
  double milliseconds = 0;  // one execute, device-synchronised
  ArrayMap outputs;         // by case name
};

// Builds the plan, lays the inputs out as declared (poisoned gaps, canaries), poisons the
// outputs, executes once, checks the guards, reads the outputs back. engine: "auto" or a name.
// seq_len_q / seq_len_kv come from the case's inputs when the problem declares them.
Result<RunResult> run_case(const Case& c, const std::string& engine, Memory memory);

}  // namespace floe::tool
