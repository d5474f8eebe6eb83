#include "support/harness_failure.h"

#include <filesystem>
#include <fstream>

#include "support/harness_env.h"

namespace floe::test {

namespace {

Status write_arrays(const std::string& dir, const tool::ArrayMap& arrays) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status(Code::internal, dir + ": " + ec.message());
  for (const auto& [name, a] : arrays) {
    if (Status st = tool::write_npy(dir + "/" + name + ".npy", a); !st) return st;
  }
  return Status();
}

}  // namespace

std::string reproduce_command(const std::string& engine, const std::string& case_dir) {
  const int kb = harness_settings().smem_limit_kb;
  return floe_cli_path() + " run --device cuda --engine " + engine +
         (kb > 0 ? " --smem-limit-kb " + std::to_string(kb) : std::string()) + " " + case_dir;
}

std::string write_failure(const std::string& dir, const std::string& name, const tool::Case& c,
                          const std::string& engine, const std::string& message,
                          const tool::ArrayMap* got, const tool::ArrayMap* want) {
  const std::string case_dir = dir + "/" + name;
  // The sequence lengths live in problem.json (DESIGN §4); the .npy files are the rest.
  tool::ArrayMap inputs = c.inputs;
  inputs.erase("seq_len_q");
  inputs.erase("seq_len_kv");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (Status st = tool::write_case(case_dir, c.json, inputs); !st) {
    return "(could not write the case folder " + case_dir + ": " + st.message() + ")";
  }
  std::ofstream(case_dir + "/failure.txt") << message << "\n";
  if (got) write_arrays(case_dir + "/got", *got);
  if (want) write_arrays(case_dir + "/expected", *want);
  return reproduce_command(engine, case_dir);
}

}  // namespace floe::test
