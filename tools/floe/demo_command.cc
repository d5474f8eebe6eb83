// floe demo: the README's main job. Causal bf16 attention, forward then backward, on the best
// engine present (CUDA if a device is usable, else the CPU reference), on seeded random data.
#include <cstdio>
#include <memory>
#include <random>

#include "case_folder.h"
#include "commands.h"

namespace floe::tool {

namespace {

struct DemoOptions {
  std::string device;
  Shape shape{2, 16, 4, 1024, 1024, 128, 128};
  int64_t s = 1024, d = 128;
  uint32_t seed = 2024;
};

HostArray random_array(const TensorDesc& desc, std::mt19937& rng) {
  HostArray a;
  a.shape.assign(desc.dims.begin(), desc.dims.begin() + desc.rank);
  a.data.resize(static_cast<size_t>(desc.numel()));
  std::normal_distribution<float> normal(0.f, 1.f);
  for (float& x : a.data) x = normal(rng);
  return a;
}

// The outputs in the order the case format lists them.
double checksum(const Problem& p, const ArrayMap& outputs) {
  double sum = 0;
  for (const std::string& name : output_names(p)) {
    for (float x : outputs.at(name).data) sum += x;
  }
  return sum;
}

std::string names(const Problem& p) {
  std::string s;
  for (const std::string& name : output_names(p)) s += (s.empty() ? "" : " + ") + name;
  return s;
}

void report(const char* direction, const Problem& p, const RunResult& r) {
  std::printf("%s: engine %s, workspace %zu bytes, %.3f ms, checksum %.6f (sum of %s)\n", direction,
              r.engine.c_str(), r.workspace_bytes, r.milliseconds, checksum(p, r.outputs),
              names(p).c_str());
}

int demo(DemoOptions opt) {
  opt.shape.s_q = opt.shape.s_kv = opt.s;
  opt.shape.d_qk = opt.shape.d_v = opt.d;
  const Memory memory = memory_of(opt.device);
  const Shape& sh = opt.shape;
  std::printf("demo: b=%lld h_q=%lld h_kv=%lld s=%lld d=%lld, causal, bf16, on the %s\n",
              static_cast<long long>(sh.b), static_cast<long long>(sh.h_q),
              static_cast<long long>(sh.h_kv), static_cast<long long>(sh.s_q),
              static_cast<long long>(sh.d_qk), memory == Memory::device ? "GPU" : "CPU");
  std::mt19937 rng(opt.seed);

  Case fwd;
  fwd.dir = "demo (forward)";
  fwd.problem = Problem::forward(sh, DType::bf16).set_causal().set_stats();
  for (const char* n : {"q", "k", "v"}) {
    fwd.inputs[n] = random_array(*fwd.problem.tensor(tensor_of(n)), rng);
  }
  Result<RunResult> f = run_case(fwd, "auto", memory);
  if (!f) {
    std::fprintf(stderr, "floe demo: forward failed (%s): %s\n", to_string(f.status().code()),
                 f.status().message().c_str());
    return 1;
  }
  report("forward", fwd.problem, *f);

  // The backward of that very forward: its o and stats, and a random upstream gradient.
  Case bwd;
  bwd.dir = "demo (backward)";
  bwd.problem = Problem::backward(sh, DType::bf16).set_causal();
  for (const char* n : {"q", "k", "v"}) bwd.inputs[n] = fwd.inputs[n];
  bwd.inputs["o"] = f->outputs.at("o");
  bwd.inputs["stats"] = f->outputs.at("stats");
  bwd.inputs["do"] = random_array(*bwd.problem.tensor(TensorId::d_o), rng);
  Result<RunResult> b = run_case(bwd, "auto", memory);
  if (!b) {
    std::fprintf(stderr, "floe demo: backward failed (%s): %s\n", to_string(b.status().code()),
                 b.status().message().c_str());
    return 1;
  }
  report("backward", bwd.problem, *b);
  return 0;
}

}  // namespace

void add_demo_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<DemoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "demo",
      "causal bf16 attention forward and backward on random data (B=2 Hq=16 Hkv=4 S=1024 D=128)");
  add_device_option(*cmd, opt->device);
  // Smaller sizes keep the demo quick on the CPU reference (and in tests).
  cmd->add_option("--b", opt->shape.b, "batch")->capture_default_str();
  cmd->add_option("--h-q", opt->shape.h_q, "query heads")->capture_default_str();
  cmd->add_option("--h-kv", opt->shape.h_kv, "key/value heads")->capture_default_str();
  cmd->add_option("--s", opt->s, "sequence length (queries and keys)")->capture_default_str();
  cmd->add_option("--d", opt->d, "head dim (d_qk = d_v)")->capture_default_str();
  cmd->add_option("--seed", opt->seed, "random seed")->capture_default_str();
  cmd->callback([opt, &exit_code] { exit_code = demo(*opt); });
}

}  // namespace floe::tool
