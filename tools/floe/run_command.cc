// floe run: every case in one process; a failing case is reported and the others still run.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "case_folder.h"
#include "commands.h"

namespace floe::tool {

namespace {

struct RunOptions {
  std::vector<std::string> cases;
  std::string engine = "auto";
  std::string device;
};

// Runs one case and writes its outputs; the error says what went wrong, not which case.
Status run_one(const std::string& dir, const RunOptions& opt, Memory memory, RunResult* out) {
  namespace fs = std::filesystem;
  // Outputs of an earlier run must not pass for this one's if it fails half way.
  const fs::path out_dir = fs::path(dir) / "out";
  for (const char* name : {"o", "stats", "dq", "dk", "dv", "dbias", "dsink"}) {
    std::error_code ec;
    fs::remove(out_dir / (std::string(name) + ".npy"), ec);
  }
  Result<Case> c = read_case(dir);
  if (!c) return c.status();
  Result<RunResult> r = run_case(*c, opt.engine, memory);
  if (!r) return r.status();
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec)
    return Status(Code::invalid_argument, out_dir.string() + ": cannot create: " + ec.message());
  for (const auto& [name, array] : r->outputs) {
    if (Status st = write_npy((out_dir / (name + ".npy")).string(), array); !st) return st;
  }
  *out = std::move(r.value());
  return Status();
}

int run(const RunOptions& opt) {
  const Memory memory = memory_of(opt.device);
  int failures = 0;
  for (const std::string& dir : opt.cases) {
    RunResult r;
    if (Status st = run_one(dir, opt, memory, &r); !st) {
      std::fprintf(stderr, "floe run: case %s failed (%s): %s\n", dir.c_str(), to_string(st.code()),
                   st.message().c_str());
      ++failures;
      continue;
    }
    std::printf("%s: engine %s, workspace %zu bytes, %.3f ms\n", dir.c_str(), r.engine.c_str(),
                r.workspace_bytes, r.milliseconds);
    std::fflush(stdout);
  }
  if (failures > 0) {
    std::fprintf(stderr, "floe run: %d of %zu cases failed\n", failures, opt.cases.size());
    return 1;
  }
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<RunOptions>();
  CLI::App* cmd =
      app.add_subcommand("run", "run case folders; outputs go to CASE/out/ as float32 .npy");
  cmd->add_option("cases", opt->cases, "case folders (problem.json + inputs)")->required();
  cmd->add_option("--engine", opt->engine, "auto, or the name of the engine that must serve");
  add_device_option(*cmd, opt->device);
  cmd->callback([opt, &exit_code] { exit_code = run(*opt); });
}

}  // namespace floe::tool
