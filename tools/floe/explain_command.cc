// floe explain: which engine serves a case and why every other one declines (Plan::explain).
// --arch plans for an architecture with no device present, so routing can be checked anywhere.
#include <cstdio>
#include <memory>
#include <regex>

#include "case_folder.h"
#include "commands.h"

namespace floe::tool {

namespace {

struct ExplainOptions {
  std::string dir;
  std::string arch;
  std::string device;
};

int explain(const ExplainOptions& opt) {
  Target target = Target::cpu();
  if (!opt.arch.empty()) {
    std::smatch m;
    // Up to four digits: every CUDA architecture there is (sm_120 the newest); more is a typo,
    // and would not fit the int a Target holds.
    if (!std::regex_match(opt.arch, m, std::regex("(?:sm_)?([0-9]{1,4})a?"))) {
      std::fprintf(stderr,
                   "floe explain: --arch %s: must look like sm_80 or sm_90 (at most four "
                   "digits)\n",
                   opt.arch.c_str());
      return 2;
    }
    target = Target::cuda_arch(std::stoi(m[1].str()));
  } else if (memory_of(opt.device) == Memory::device) {
    Result<Target> t = Target::cuda();
    if (!t) {
      std::fprintf(stderr, "floe explain: --device cuda: %s\n", t.status().message().c_str());
      return 1;
    }
    target = *t;
  }
  Result<Case> c = read_case_problem(opt.dir);
  if (!c) {
    std::fprintf(stderr, "floe explain: case %s: %s\n", opt.dir.c_str(),
                 c.status().message().c_str());
    return 1;
  }
  Result<Plan> plan = Plan::build(c->problem, target);
  if (!plan) {
    std::fprintf(stderr, "floe explain: case %s: %s\n", opt.dir.c_str(),
                 plan.status().message().c_str());
    return 1;
  }
  std::fputs(plan->explain().c_str(), stdout);
  return 0;
}

}  // namespace

void add_explain_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<ExplainOptions>();
  CLI::App* cmd =
      app.add_subcommand("explain", "show the engine a case gets and every engine's verdict");
  cmd->add_option("case", opt->dir, "case folder")->required();
  CLI::Option* arch = cmd->add_option("--arch", opt->arch,
                                      "plan for this architecture without a device (sm_80, sm_90)");
  add_device_option(*cmd, opt->device);
  arch->excludes(cmd->get_option("--device"));
  cmd->callback([opt, &exit_code] { exit_code = explain(*opt); });
}

}  // namespace floe::tool
