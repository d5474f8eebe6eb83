// libFuzzer target: problem.json text -> parse (duplicate keys, numbers out of range) ->
// Problem -> span check -> Plan::build for the CPU and both GPU architectures, and the
// round trip through problem_to_json for what is accepted. Any crash or sanitizer report is
// a failure; refusals are the expected outcome for most inputs.
#include <cstddef>
#include <cstdint>
#include <string>

#include "case_folder.h"
#include "floe/floe.h"

using namespace floe;
using namespace floe::tool;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Result<nlohmann::json> j = parse_problem_json(text, "problem.json");
  if (!j) return 0;
  Result<Problem> p = problem_from_json(*j);
  if (!p) return 0;
  if (!check_spans(*p)) return 0;
  for (const Target& t : {Target::cpu(), Target::cuda_arch(80), Target::cuda_arch(90)}) {
    Result<Plan> plan = Plan::build(*p, t);
    if (!plan) continue;
    (void)plan->explain();
    (void)plan->workspace_bytes();
  }
  ArrayMap lens;
  for (const char* n : {"seq_len_q", "seq_len_kv"}) {
    if (!p->has(tensor_of(n))) continue;
    HostArray a;
    a.shape = {static_cast<int64_t>(j->at(n).size())};
    for (const auto& x : j->at(n)) a.data.push_back(static_cast<float>(x.get<int64_t>()));
    lens[n] = a;
  }
  Result<nlohmann::json> back = problem_to_json(*p, lens);
  if (back) {
    // What problem_to_json writes must read back.
    if (!problem_from_json(*back)) __builtin_trap();
  }
  return 0;
}
