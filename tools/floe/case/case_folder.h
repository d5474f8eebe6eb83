// Case folders (DESIGN §4): problem.json plus logical float32 .npy inputs; outputs go to
// CASE/out/. Shared by the command line and the GPU tests, which write a case folder for
// every failure so that `floe run --device cuda` reproduces it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "buffers.h"
#include "floe/plan.h"
#include "floe/problem.h"
#include "npy.h"

namespace floe::tool {

using ArrayMap = std::map<std::string, HostArray>;  // by case name: q k v bias sink o do stats ...

// problem.json <-> Problem. Errors name the key and the rule.
Result<Problem> problem_from_json(const nlohmann::json& json);
// The sequence lengths, token offsets and block tables are values, not part of a Problem:
// problem_to_json takes them from `inputs` ("seq_len_q", "seq_len_kv": [b]; "offsets_q",
// "offsets_kv": [b + 1]; "block_table": [b, max_pages]; integers) when the problem declares
// them, and writes them where DESIGN 4 puts them (ragged_q.offsets, paged_kv.block_table).
// Fails for a problem problem.json cannot express (a tensor whose dtype or dims differ from
// what the shape and dtype imply, a backward bias without dbias).
Result<nlohmann::json> problem_to_json(const Problem& problem, const ArrayMap& inputs = {});

struct Case {
  std::string dir;
  nlohmann::json json;
  Problem problem = Problem::forward(Shape{}, DType::bf16);
  ArrayMap inputs;
};

// The inputs the problem needs, by case name: q k v [bias] [sink] [seq_len_q] [seq_len_kv]
// [offsets_q] [offsets_kv] [block_table] (the integer arrays live in problem.json; read_case
// puts them here as arrays);
// backward also o do stats.
std::vector<std::string> input_names(const Problem& problem);
// The outputs: forward o [stats]; backward dq dk dv [dbias] [dsink].
std::vector<std::string> output_names(const Problem& problem);
// The TensorId of a case name ("do" -> d_o, ...). Throws std::invalid_argument for a name
// that is no tensor's.
TensorId tensor_of(const std::string& name);

// The sizes' products fit in 64 bits (in bytes, for every tensor; bias with its two leading
// dims), so that a Problem can be made from them: Problem::forward lays its tensors out
// packed, and the library multiplies the sizes without an overflow check. Refuses naming
// the tensor and the keys.
Status shape_fits(const Shape& shape, int64_t bias_b = 1, int64_t bias_h = 1);

// problem.json's text -> json: refuses text that is not JSON, numbers no double holds
// (1e400) and duplicate keys, naming `path`.
Result<nlohmann::json> parse_problem_json(const std::string& text, const std::string& path);
// Every declared tensor's span fits in 64 bits (span_bytes_checked), naming the tensor.
Status check_spans(const Problem& problem);

// Reads problem.json, checks the problem's rules (as Plan::build does) and only then the
// inputs. Refuses a .npy in the folder that the problem does not read.
Result<Case> read_case(const std::string& dir);
// problem.json alone (inputs left empty): enough to plan and explain.
Result<Case> read_case_problem(const std::string& dir);
// Writes problem.json and the inputs; creates the folder. Inputs named seq_len_q/seq_len_kv,
// offsets_q/offsets_kv and block_table go into the json (replacing what it holds), every other
// input into NAME.npy.
Status write_case(const std::string& dir, const nlohmann::json& json, const ArrayMap& inputs);
// The same from a Problem (problem_to_json), for tests that write a reproducer.
Status write_case(const std::string& dir, const Problem& problem, const ArrayMap& inputs);

struct RunResult {
  std::string engine;
  std::string kernel;  // the kernel explain names in its plan line (sm80_bwd_d128_bf16_plain),
                       // empty where the engine names none
  size_t workspace_bytes = 0;
  double milliseconds = 0;  // one execute, device-synchronised
  ArrayMap outputs;         // by case name
};

// Builds the plan, lays the inputs out as declared (poisoned gaps, canaries), poisons the
// outputs, executes once, checks the guards, reads the outputs back. engine: "auto" or a name.
// seq_len_q / seq_len_kv come from the case's inputs when the problem declares them.
// smem_limit_kb > 0 (device only): planned as if the device allowed at most that many KB of
// shared memory per block, so the engines pick the tiles of a part with less (sm_86: 99, A100:
// 163) and those run on this one.
Result<RunResult> run_case(const Case& c, const std::string& engine, Memory memory,
                           int smem_limit_kb = 0);

// Caps the target's shared memory per block at smem_limit_kb KB (0: leaves it).
void limit_smem_per_block(Target& target, int smem_limit_kb);

}  // namespace floe::tool
