// floe demo: the README's main job. Causal bf16 attention, forward then backward, on the best
// engine present (CUDA if a device is usable, else the CPU reference), on seeded random data;
// then the error of every output against the reference engine on sampled rows, so that a
// user sees the result is right, not a bare checksum.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <new>
#include <random>
#include <set>

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

// Heads [h0, h0 + hc) and rows [r0, r0 + rc) of batch b of a [B, H, S] or [B, H, S, D] array.
HostArray slice(const HostArray& a, int64_t b, int64_t h0, int64_t hc, int64_t r0, int64_t rc) {
  const int64_t H = a.shape[1], S = a.shape[2], D = a.shape.size() == 4 ? a.shape[3] : 1;
  HostArray out;
  out.shape = {1, hc, rc};
  if (a.shape.size() == 4) out.shape.push_back(D);
  out.data.reserve(static_cast<size_t>(hc * rc * D));
  for (int64_t h = 0; h < hc; ++h) {
    for (int64_t r = 0; r < rc; ++r) {
      const int64_t base = ((b * H + h0 + h) * S + r0 + r) * D;
      out.data.insert(out.data.end(), a.data.begin() + base, a.data.begin() + base + D);
    }
  }
  return out;
}

// The largest error over the sampled rows of one output, and the largest reference value
// beside it for scale.
struct Error {
  double max_error = 0, max_ref = 0;
  int rows = 0;
  void add(const HostArray& got, const HostArray& ref) {
    for (size_t i = 0; i < got.data.size(); ++i) {
      const double e = std::fabs(static_cast<double>(got.data[i]) - ref.data[i]);
      max_error = std::isnan(e) ? e : std::max(max_error, e);
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref.data[i])));
    }
    ++rows;
  }
};

std::vector<int64_t> picks(std::initializer_list<int64_t> xs) {
  const std::set<int64_t> unique(xs);
  return std::vector<int64_t>(unique.begin(), unique.end());
}

// Runs a small problem on the reference engine; its outputs by case name.
Result<ArrayMap> reference(const Problem& p, ArrayMap inputs) {
  Case c;
  c.problem = p;
  c.inputs = std::move(inputs);
  Result<RunResult> r = run_case(c, "reference", Memory::host);
  if (!r) return r.status();
  return std::move(r->outputs);
}

void print_errors(const char* direction, const std::vector<std::pair<std::string, Error>>& errs) {
  std::printf("%s against the reference engine (fp64) on sampled rows:", direction);
  for (const auto& [name, e] : errs) {
    std::printf("  %s max |error| %.2e (max |value| %.2e, %d rows)", name.c_str(), e.max_error,
                e.max_ref, e.rows);
  }
  std::printf("\n");
}

// Rows of o, stats and dq: each sampled query row is a problem of its own (one query, the
// keys it sees under the causal mask, no mask left). Rows of dk and dv: each sampled key is
// seen by the queries from it on, and with the forward's stats its gradient needs only the
// keys up to it: one problem with those rows and keys, and the kv head's query heads.
Status check_against_reference(const Shape& sh, const Case& fwd, const RunResult& f,
                               const Case& bwd, const RunResult& b) {
  const int64_t B = sh.b, Hq = sh.h_q, Hkv = sh.h_kv, S = sh.s_q, D = sh.d_qk;
  const int64_t group = Hq / Hkv;
  Error o_err, stats_err, dq_err, dk_err, dv_err;
  for (int64_t bi : picks({0, B - 1})) {
    for (int64_t h : picks({0, Hq - 1})) {
      const int64_t g = h / group;
      for (int64_t i : picks({0, S / 3, 2 * S / 3, S - 1})) {
        ArrayMap in;
        in["q"] = slice(fwd.inputs.at("q"), bi, h, 1, i, 1);
        in["k"] = slice(fwd.inputs.at("k"), bi, g, 1, 0, i + 1);
        in["v"] = slice(fwd.inputs.at("v"), bi, g, 1, 0, i + 1);
        const Shape row{1, 1, 1, 1, i + 1, D, D};
        Result<ArrayMap> rf = reference(Problem::forward(row, DType::bf16).set_stats(), in);
        if (!rf) return rf.status();
        o_err.add(slice(f.outputs.at("o"), bi, h, 1, i, 1), rf->at("o"));
        stats_err.add(slice(f.outputs.at("stats"), bi, h, 1, i, 1), rf->at("stats"));
        in["o"] = slice(bwd.inputs.at("o"), bi, h, 1, i, 1);
        in["stats"] = slice(bwd.inputs.at("stats"), bi, h, 1, i, 1);
        in["do"] = slice(bwd.inputs.at("do"), bi, h, 1, i, 1);
        Result<ArrayMap> rb = reference(Problem::backward(row, DType::bf16), in);
        if (!rb) return rb.status();
        dq_err.add(slice(b.outputs.at("dq"), bi, h, 1, i, 1), rb->at("dq"));
      }
    }
  }
  for (auto [bi, g] : {std::pair<int64_t, int64_t>{0, 0}, {B - 1, Hkv - 1}}) {
    for (int64_t j : picks({0, S / 2, S - 1})) {
      // Under the causal mask key j is seen by the query rows from j on, and each of them
      // sees every key up to j: rows j.. against keys ..j, no mask, is exact for key j.
      ArrayMap in;
      for (const char* n : {"q", "o", "do", "stats"}) {
        in[n] = slice(bwd.inputs.at(n), bi, g * group, group, j, S - j);
      }
      in["k"] = slice(bwd.inputs.at("k"), bi, g, 1, 0, j + 1);
      in["v"] = slice(bwd.inputs.at("v"), bi, g, 1, 0, j + 1);
      const Shape keys{1, group, 1, S - j, j + 1, D, D};
      Result<ArrayMap> rb = reference(Problem::backward(keys, DType::bf16), in);
      if (!rb) return rb.status();
      dk_err.add(slice(b.outputs.at("dk"), bi, g, 1, j, 1), slice(rb->at("dk"), 0, 0, 1, j, 1));
      dv_err.add(slice(b.outputs.at("dv"), bi, g, 1, j, 1), slice(rb->at("dv"), 0, 0, 1, j, 1));
    }
    if (B == 1 && Hkv == 1) break;
  }
  print_errors("forward", {{"o", o_err}, {"stats", stats_err}});
  print_errors("backward", {{"dq", dq_err}, {"dk", dk_err}, {"dv", dv_err}});
  return Status();
}

void report(const char* direction, const RunResult& r) {
  std::printf("%s: engine %s, workspace %zu bytes, %.3f ms\n", direction, r.engine.c_str(),
              r.workspace_bytes, r.milliseconds);
}

// The sizes before any memory is touched: the problem's rules (a negative or zero size, a
// bad head count) and whether the host arrays fit in this machine's memory, so that huge
// sizes are a message, not an abort or the OOM killer.
Status check_sizes(const Problem& fwd, const Problem& bwd) {
  if (Result<Plan> p = Plan::build(fwd, Target::cpu());
      !p && p.status().code() == Code::invalid_problem) {
    return p.status();
  }
  if (Status st = check_spans(fwd); !st) return st;
  if (Status st = check_spans(bwd); !st) return st;
  // The demo holds about three copies of every tensor (the arrays, the buffers' images, the
  // buffers); count float32 elements with no overflow.
  double bytes = 0;
  for (const Problem* p : {&fwd, &bwd}) {
    for (int i = 0; i < kTensorCount; ++i) {
      if (p->has(static_cast<TensorId>(i))) {
        bytes += 3.0 * 4.0 * static_cast<double>(p->tensor(static_cast<TensorId>(i))->numel());
      }
    }
  }
  const double memory =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  if (memory > 0 && bytes > memory / 2) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "these sizes need about %.1f GiB of host memory, more than half of this "
                  "machine's %.1f GiB",
                  bytes / (1 << 30), memory / (1 << 30));
    return Status(Code::invalid_argument, buf);
  }
  return Status();
}

int demo(DemoOptions opt) {
  // The options themselves first: a negative size would otherwise surface as negative strides.
  for (const auto& [flag, value] : {std::pair<const char*, int64_t>{"--b", opt.shape.b},
                                    {"--h-q", opt.shape.h_q},
                                    {"--h-kv", opt.shape.h_kv},
                                    {"--s", opt.s},
                                    {"--d", opt.d}}) {
    if (value <= 0) {
      std::fprintf(stderr, "floe demo: %s %lld: must be positive\n", flag,
                   static_cast<long long>(value));
      return 1;
    }
  }
  opt.shape.s_q = opt.shape.s_kv = opt.s;
  opt.shape.d_qk = opt.shape.d_v = opt.d;
  const Memory memory = memory_of(opt.device);
  const Shape& sh = opt.shape;
  std::printf("demo: b=%lld h_q=%lld h_kv=%lld s=%lld d=%lld, causal, bf16, on the %s\n",
              static_cast<long long>(sh.b), static_cast<long long>(sh.h_q),
              static_cast<long long>(sh.h_kv), static_cast<long long>(sh.s_q),
              static_cast<long long>(sh.d_qk), memory == Memory::device ? "GPU" : "CPU");
  std::fflush(stdout);

  Case fwd;
  fwd.dir = "demo (forward)";
  fwd.problem = Problem::forward(sh, DType::bf16).set_causal().set_stats();
  Case bwd;
  bwd.dir = "demo (backward)";
  bwd.problem = Problem::backward(sh, DType::bf16).set_causal();
  if (Status st = check_sizes(fwd.problem, bwd.problem); !st) {
    std::fprintf(stderr, "floe demo: %s\n", st.message().c_str());
    return 1;
  }

  std::mt19937 rng(opt.seed);
  for (const char* n : {"q", "k", "v"}) {
    fwd.inputs[n] = random_array(*fwd.problem.tensor(tensor_of(n)), rng);
  }
  Result<RunResult> f = run_case(fwd, "auto", memory);
  if (!f) {
    std::fprintf(stderr, "floe demo: forward failed (%s): %s\n", to_string(f.status().code()),
                 f.status().message().c_str());
    return 1;
  }
  report("forward", *f);

  // The backward of that very forward: its o and stats, and a random upstream gradient.
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
  report("backward", *b);
  if (Status st = check_against_reference(sh, fwd, *f, bwd, *b); !st) {
    std::fprintf(stderr, "floe demo: the reference check failed (%s): %s\n", to_string(st.code()),
                 st.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

void add_demo_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<DemoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "demo",
      "causal bf16 attention forward and backward on random data (B=2 Hq=16 Hkv=4 S=1024 D=128), "
      "and its error against the reference engine on sampled rows");
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
