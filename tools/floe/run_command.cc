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
  int smem_limit_kb = 0;
};

namespace fs = std::filesystem;

// Removes `path` if it is there; the error says why it could not be.
Status remove_if_there(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) return Status(Code::invalid_argument, path.string() + ": cannot remove: " + ec.message());
  return Status();
}

// The outputs go into CASE/.out.partial first and only a complete set is renamed to
// CASE/out. The earlier out/ is removed before anything else, so that whatever fails later
// (the case, a write, the rename) leaves no output of an earlier run that could pass as
// this one's. The error says what went wrong, not which case.
Status run_one(const std::string& dir, const RunOptions& opt, Memory memory, RunResult* out) {
  const fs::path out_dir = fs::path(dir) / "out";
  const fs::path partial = fs::path(dir) / ".out.partial";
  std::error_code ec;
  if (fs::is_directory(dir, ec)) {
    if (Status st = remove_if_there(out_dir); !st) {
      return Status(st.code(), st.message() + " (the outputs of an earlier run are still there)");
    }
    if (Status st = remove_if_there(partial); !st) return st;
  }
  Result<Case> c = read_case(dir);
  if (!c) return c.status();
  Result<RunResult> r = run_case(*c, opt.engine, memory, opt.smem_limit_kb);
  if (!r) return r.status();
  fs::create_directories(partial, ec);
  if (ec) {
    return Status(Code::invalid_argument, partial.string() + ": cannot create: " + ec.message());
  }
  for (const auto& [name, array] : r->outputs) {
    if (Status st = write_npy((partial / (name + ".npy")).string(), array); !st) {
      remove_if_there(partial);
      return st;
    }
  }
  fs::rename(partial, out_dir, ec);
  if (ec) {
    remove_if_there(partial);
    return Status(Code::invalid_argument,
                  out_dir.string() + ": cannot move the outputs into place: " + ec.message());
  }
  *out = std::move(r.value());
  return Status();
}

// A refusal is the case's fault (its problem, its files); a failure is floe's or the
// device's. The summary counts them apart.
bool is_refusal(Code code) {
  return code == Code::invalid_problem || code == Code::invalid_argument ||
         code == Code::not_supported;
}

int run(const RunOptions& opt) {
  const Memory memory = memory_of(opt.device);
  int ran = 0, refused = 0, failed = 0;
  for (const std::string& dir : opt.cases) {
    RunResult r;
    Status st;
    // No case may end the run: an exception escaping floe's code is reported as that case's
    // failure and the next case still runs.
    try {
      st = run_one(dir, opt, memory, &r);
    } catch (const std::exception& e) {
      st = Status(Code::internal, std::string("unexpected exception: ") + e.what());
    }
    if (!st) {
      const bool refusal = is_refusal(st.code());
      std::fprintf(stderr, "floe run: case %s %s (%s): %s\n", dir.c_str(),
                   refusal ? "refused" : "failed", to_string(st.code()), st.message().c_str());
      ++(refusal ? refused : failed);
      continue;
    }
    ++ran;
    std::printf("%s: engine %s, workspace %zu bytes, %.3f ms\n", dir.c_str(), r.engine.c_str(),
                r.workspace_bytes, r.milliseconds);
    std::fflush(stdout);
  }
  if (opt.cases.size() > 1 || refused + failed > 0) {
    std::fflush(stdout);
    std::fprintf(stderr, "floe run: %zu cases: %d ran, %d refused, %d failed\n", opt.cases.size(),
                 ran, refused, failed);
  }
  return refused + failed > 0 ? 1 : 0;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<RunOptions>();
  CLI::App* cmd =
      app.add_subcommand("run",
                         "run case folders; outputs go to CASE/out/ as float32 .npy. A case "
                         "folder holds problem.json and the inputs as float32 .npy: the case "
                         "format is in docs/design.md, section 4 (examples: tests/cases/)");
  cmd->add_option("cases", opt->cases, "case folders (problem.json + inputs)")->required();
  cmd->add_option("--engine", opt->engine, "auto, or the name of the engine that must serve");
  add_device_option(*cmd, opt->device);
  cmd->add_option("--smem-limit-kb", opt->smem_limit_kb,
                  "plan as if the device allowed at most this much shared memory per block (KB), "
                  "so the tiles of a smaller part run here (sm_86/sm_89: 99, A100: 163)")
      ->check(CLI::PositiveNumber);
  cmd->callback([opt, &exit_code] { exit_code = run(*opt); });
}

}  // namespace floe::tool
