// floe bench: times floe's engines on the GPU over DESIGN §6's sweep (or one problem given on
// the command line) and writes the JSON that bench/peers.py times the peers against.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>

#include "bench_problems.h"
#include "bench_report.h"
#include "bench_runner.h"
#include "commands.h"

namespace floe::tool {

namespace {

struct BenchOptions {
  std::string sweep = "standard";
  std::vector<std::string> groups;
  std::vector<std::string> filters;  // keep the problems whose name contains one of these
  std::string direction = "both";
  std::vector<std::string> engines{"auto"};
  std::string json;
  BenchSettings settings;
  int host_calls = 100;

  // One problem instead of a sweep. 0 means "as the other dim": h_kv = h_q, s_kv = s_q,
  // d_v = d_qk. The defaults are the cost-of-features point (16k tokens, hidden 2048).
  Shape shape{4, 16, 0, 4096, 0, 128, 0};
  int64_t gqa = 0;
  bool causal = false;
  std::string dtype = "bf16";
  int64_t window_left = -1, window_right = -1;
  std::vector<int64_t> bias;
  bool no_bias_grad = false;
  bool sink = false;
  double softcap = 0;
  bool deterministic = false;
  int64_t stats_gap = 0;
  std::string layout = "bhsd";
  std::vector<CLI::Option*> problem_options;  // any of these given: bench that one problem
  CLI::Option* sweep_option = nullptr;
};

bool custom_problem(const BenchOptions& opt) {
  for (const CLI::Option* o : opt.problem_options) {
    if (o->count() > 0) return true;
  }
  return false;
}

BenchProblem problem_of(const BenchOptions& opt) {
  BenchProblem bp;
  bp.group = "custom";
  bp.dtype = opt.dtype == "f16" ? DType::f16 : DType::bf16;
  bp.shape = opt.shape;
  Shape& s = bp.shape;
  if (s.h_kv == 0) s.h_kv = opt.gqa > 0 ? s.h_q / opt.gqa : s.h_q;
  if (s.s_kv == 0) s.s_kv = s.s_q;
  if (s.d_v == 0) s.d_v = s.d_qk;
  if (opt.causal) bp.mask.right = 0;
  if (opt.window_left >= 0) bp.mask.left = opt.window_left;
  if (opt.window_right >= 0) bp.mask.right = opt.window_right;
  if (opt.bias.size() == 2) bp.bias = std::array<int64_t, 2>{opt.bias[0], opt.bias[1]};
  bp.bias_grad = !opt.no_bias_grad;
  bp.sink = opt.sink;
  if (opt.softcap > 0) bp.softcap = opt.softcap;
  bp.deterministic = opt.deterministic;
  bp.stats_gap = opt.stats_gap;
  bp.layout = opt.layout == "bshd" ? BenchLayout::bshd : BenchLayout::bhsd;
  return bp;
}

// The commit the numbers belong to: FLOE_COMMIT, else git in the current folder (with
// "-dirty" when tracked files differ from it), else unknown.
std::pair<std::string, std::string> floe_commit() {
  if (const char* env = std::getenv("FLOE_COMMIT"); env != nullptr && *env != '\0') {
    return {env, "FLOE_COMMIT"};
  }
  auto shell = [](const char* cmd) {
    std::string out;
    if (FILE* p = popen(cmd, "r")) {
      char buf[256];
      while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
      if (pclose(p) != 0) out.clear();
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
  };
  std::string head = shell("git rev-parse HEAD 2>/dev/null");
  if (head.empty()) return {"", ""};
  if (!shell("git status --porcelain --untracked-files=no 2>/dev/null").empty()) head += "-dirty";
  return {head, "git"};
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Checks everything that needs no GPU: engine names, groups, the custom problem's validity.
// Returns the engines to time ("all" expanded), or an error message.
Result<std::vector<std::string>> check_options(const BenchOptions& opt) {
  std::vector<std::string> engines;
  const std::vector<std::string> known = engine_names();
  std::string names;
  for (const std::string& n : known) names += (names.empty() ? "" : ", ") + n;
  for (const std::string& e : opt.engines) {
    if (e == "all") {
      // Every engine that can run on a GPU: the reference engine is the CPU's.
      for (const std::string& n : known) {
        if (n != "reference") engines.push_back(n);
      }
    } else if (e == "auto" || std::find(known.begin(), known.end(), e) != known.end()) {
      engines.push_back(e);
    } else {
      return Status(Code::invalid_argument,
                    "--engine " + e + ": '" + e + "' is not an engine (auto, all, " + names + ")");
    }
  }
  // Each engine once, in the order given ("--engine all generic" times generic once).
  std::vector<std::string> unique;
  for (const std::string& e : engines) {
    if (std::find(unique.begin(), unique.end(), e) == unique.end()) unique.push_back(e);
  }
  engines = unique;
  if (custom_problem(opt)) {
    if (opt.sweep_option->count() > 0 || !opt.groups.empty()) {
      return Status(Code::invalid_argument,
                    "--sweep/--group and the problem options exclude each other");
    }
    const BenchProblem bp = problem_of(opt);
    if (opt.gqa > 0 && bp.shape.h_q % opt.gqa != 0) {
      return Status(Code::invalid_argument, "--gqa " + std::to_string(opt.gqa) +
                                                ": must divide --h-q (" +
                                                std::to_string(bp.shape.h_q) + ")");
    }
    // Validation needs no device: plan for Hopper without one.
    for (Direction dir : {Direction::forward, Direction::backward}) {
      Result<Plan> p = Plan::build(make_problem(bp, dir), Target::cuda_arch(90));
      if (!p && p.status().code() == Code::invalid_problem) {
        return Status(Code::invalid_argument,
                      "the problem (" + bp.name() + ") is invalid: " + p.status().message());
      }
    }
  }
  return engines;
}

std::vector<BenchProblem> problems_of(const BenchOptions& opt) {
  if (custom_problem(opt)) return {problem_of(opt)};
  std::vector<BenchProblem> all = opt.sweep == "quick" ? quick_problems() : standard_problems();
  if (opt.groups.empty()) return all;
  // Only on request: its decodes read gigabytes of K/V per problem.
  for (BenchProblem& bp : serving_problems()) all.push_back(std::move(bp));
  std::vector<BenchProblem> out;
  for (const BenchProblem& bp : all) {
    if (std::find(opt.groups.begin(), opt.groups.end(), bp.group) == opt.groups.end()) continue;
    const std::string name = bp.name();
    const bool kept = opt.filters.empty() || std::any_of(opt.filters.begin(), opt.filters.end(),
                                                         [&](const std::string& f) {
                                                           return name.find(f) != std::string::npos;
                                                         });
    if (kept) out.push_back(bp);
  }
  return out;
}

nlohmann::json report_json(const BenchOptions& opt, const BenchRunner& runner,
                           const std::vector<std::string>& engines,
                           const std::vector<BenchRecord>& records,
                           const std::vector<HostRecord>& host) {
  const DeviceInfo& d = runner.device();
  const auto [commit, commit_source] = floe_commit();
  nlohmann::json j;
  j["tool"] = "floe bench";
  j["format"] = 1;
  j["date"] = utc_now();
  j["commit"] = commit.empty() ? nlohmann::json() : nlohmann::json(commit);
  j["commit_source"] = commit_source.empty() ? nlohmann::json() : nlohmann::json(commit_source);
  j["gpu"] = {{"name", d.name},
              {"arch", "sm_" + std::to_string(d.arch)},
              {"sm_count", d.sm_count},
              {"cuda_runtime", d.runtime_version},
              {"cuda_driver", d.driver_version}};
  j["sweep"] = custom_problem(opt) ? "custom" : opt.sweep;
  j["groups"] = opt.groups;
  j["engines"] = engines;
  j["method"] = {
      {"warmups", opt.settings.warmups},
      {"calls", opt.settings.calls},
      {"min_calls", kMinCalls},
      {"budget_ms", opt.settings.budget_ms},
      {"l2_bytes", kL2Bytes},
      {"seed", opt.settings.seed},
      {"timer",
       "CUDA events around each single execute(), back to back on one stream; median. Decodes "
       "(timing: graph): each input set's execute() captured once into a CUDA graph, the "
       "graphs replayed between the events instead"},
      {"flops",
       "forward 2*B*Hq*pairs*(Dqk+Dv), backward 2.5x forward; pairs = Sq*Skv without a mask, "
       "Sq*Skv/2 for causal (the FlashAttention convention), the exact count of visible (i, j) "
       "pairs for any other band (flop_rule per record); serving records count the visible "
       "pairs of their actual lengths, summed over batches (pairs already include B)"},
      {"kv_bytes",
       "paged decode: K+V bytes read, sum of seq_kv * Hkv * (Dqk+Dv) * element size; tb_per_s = "
       "kv_bytes over the median call"},
      {"serving",
       "offsets, lengths and block tables are built on the host (fixed seeds) and uploaded with "
       "the inputs, before the warm-ups"},
      {"forward", "writes stats (LSE), as a training forward does"},
      {"backward", "O and stats from floe's forward (engine auto) on the same inputs"},
      {"rotation",
       "working sets under l2_bytes rotate among input_sets copies so calls do not hit a warm L2"}};
  j["records"] = nlohmann::json::array();
  for (const BenchRecord& r : records) j["records"].push_back(record_json(r));
  j["host_overhead"] = nlohmann::json::array();
  for (const HostRecord& h : host) j["host_overhead"].push_back(host_json(h));
  return j;
}

int bench(const BenchOptions& opt) {
  Result<std::vector<std::string>> engines = check_options(opt);
  if (!engines) {
    std::fprintf(stderr, "floe bench: %s\n", engines.status().message().c_str());
    return 2;
  }
  Result<std::unique_ptr<BenchRunner>> runner = BenchRunner::create(opt.settings);
  if (!runner) {
    std::fprintf(stderr, "floe bench: %s\n", runner.status().message().c_str());
    return 1;
  }
  BenchRunner& run = **runner;
  std::vector<Direction> dirs;
  if (opt.direction != "bwd") dirs.push_back(Direction::forward);
  if (opt.direction != "fwd") dirs.push_back(Direction::backward);
  const std::vector<BenchProblem> problems = problems_of(opt);
  size_t total = 0;
  for (const BenchProblem& bp : problems) {
    for (Direction dir : dirs) {
      if (dir == Direction::forward || !bp.forward_only()) total += engines->size();
    }
  }
  std::fprintf(stderr, "floe bench: %zu measurements on %s (sm_%d)\n", total,
               run.device().name.c_str(), run.device().arch);

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<BenchRecord> records;
  int errors = 0;
  for (const BenchProblem& bp : problems) {
    for (Direction dir : dirs) {
      if (dir == Direction::backward && bp.forward_only()) continue;
      for (const std::string& engine : *engines) {
        BenchRecord r;
        r.problem = bp;
        r.direction = dir;
        r.engine_requested = engine;
        r.flops = count_flops(bp, dir);
        r.m = run.measure(bp, dir, engine);
        errors += r.m.status == "error";
        std::fprintf(stderr, "[%zu/%zu] %s\n", records.size() + 1, total, progress_line(r).c_str());
        records.push_back(std::move(r));
      }
    }
  }
  std::vector<HostRecord> host;
  for (Direction dir : dirs) {
    HostRecord h;
    h.problem = host_overhead_problem();
    h.direction = dir;
    h.h = run.host_overhead(h.problem, dir, opt.host_calls);
    host.push_back(std::move(h));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  print_table(stdout, records, host);
  std::fflush(stdout);
  if (!opt.json.empty()) {
    std::ofstream out(opt.json);
    out << report_json(opt, run, *engines, records, host).dump(1) << "\n";
    if (!out) {
      std::fprintf(stderr, "floe bench: %s: cannot write\n", opt.json.c_str());
      return 1;
    }
    std::fprintf(stderr, "floe bench: wrote %s\n", opt.json.c_str());
  }
  std::fprintf(stderr, "floe bench: %zu measurements in %.1f s, %d error(s)\n", records.size(),
               seconds, errors);
  return errors > 0 ? 1 : 0;
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "time floe's engines on the GPU: DESIGN §6's sweep, or one problem from the options below");
  opt->sweep_option =
      cmd->add_option("--sweep", opt->sweep,
                      "standard: the §6 sweep (D 64/128/256, S 512..16384, causal and not), the "
                      "other shapes and the cost of features; quick: 8 sweep points")
          ->check(CLI::IsMember({"standard", "quick"}))
          ->capture_default_str();
  cmd->add_option("--group", opt->groups,
                  "only these groups: sweep shapes features, or serving (ragged prefill and "
                  "paged decode, never in the default run)")
      ->check(CLI::IsMember({"sweep", "shapes", "features", "serving"}));
  cmd->add_option("--filter", opt->filters,
                  "within the groups, only the problems whose name contains one of these");
  cmd->add_flag(
      "--direct", [opt](int64_t) { opt->settings.graph = false; },
      "time decodes as direct executes (default: replayed CUDA graphs)");
  cmd->add_option("--direction", opt->direction, "fwd, bwd or both")
      ->check(CLI::IsMember({"fwd", "bwd", "both"}))
      ->capture_default_str();
  cmd->add_option("--engine", opt->engines,
                  "auto (the plan's choice), all (every GPU engine), or engine names; "
                  "an engine that declines a problem is recorded with its reason")
      ->capture_default_str();
  cmd->add_option("--json", opt->json, "write every record here (bench/peers.py reads it)");
  cmd->add_option("--warmups", opt->settings.warmups, "untimed calls first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--calls", opt->settings.calls, "timed calls (median and min reported)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  cmd->add_option("--budget-ms", opt->settings.budget_ms,
                  "a problem whose calls would take longer gets fewer (at least 5)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--seed", opt->settings.seed, "random inputs' seed")->capture_default_str();
  cmd->add_option("--smem-limit-kb", opt->settings.smem_limit_kb,
                  "plan as if the device allowed at most this much shared memory per block (KB): "
                  "times the tiles of a smaller part (sm_86/sm_89: 99, A100: 163)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--host-calls", opt->host_calls, "execute() calls timed on the host")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();

  // One problem: giving any of these benches it instead of a sweep.
  auto& po = opt->problem_options;
  po.push_back(cmd->add_option("--b", opt->shape.b, "batch")->check(CLI::PositiveNumber));
  po.push_back(cmd->add_option("--h-q", opt->shape.h_q, "query heads")->check(CLI::PositiveNumber));
  po.push_back(cmd->add_option("--h-kv", opt->shape.h_kv, "key/value heads (default: h-q)")
                   ->check(CLI::PositiveNumber));
  po.push_back(cmd->add_option("--gqa", opt->gqa, "query heads per key/value head (h-kv = h-q/N)")
                   ->check(CLI::PositiveNumber)
                   ->excludes("--h-kv"));
  po.push_back(
      cmd->add_option("--s-q", opt->shape.s_q, "query length")->check(CLI::PositiveNumber));
  po.push_back(cmd->add_option("--s-kv", opt->shape.s_kv, "key length (default: s-q)")
                   ->check(CLI::PositiveNumber));
  po.push_back(cmd->add_option("--d-qk", opt->shape.d_qk, "head dim of q and k")
                   ->check(CLI::PositiveNumber));
  po.push_back(cmd->add_option("--d-v", opt->shape.d_v, "head dim of v and o (default: d-qk)")
                   ->check(CLI::PositiveNumber));
  po.push_back(cmd->add_flag("--causal", opt->causal, "causal mask (top-left)"));
  po.push_back(
      cmd->add_option("--dtype", opt->dtype, "bf16 or f16")->check(CLI::IsMember({"bf16", "f16"})));
  po.push_back(cmd->add_option("--window-left", opt->window_left,
                               "sliding window: keys up to this far left of the query")
                   ->check(CLI::NonNegativeNumber));
  po.push_back(cmd->add_option("--window-right", opt->window_right,
                               "keys up to this far right of the query (0: causal)")
                   ->check(CLI::NonNegativeNumber));
  po.push_back(cmd->add_option("--bias", opt->bias, "additive bias with these leading dims: B H")
                   ->expected(2));
  po.push_back(cmd->add_flag("--no-bias-grad", opt->no_bias_grad,
                             "the backward declares no dBias (a bias that needs no gradient)"));
  po.push_back(cmd->add_flag("--sink", opt->sink, "a per-head sink logit"));
  po.push_back(
      cmd->add_option("--softcap", opt->softcap, "softcap value")->check(CLI::PositiveNumber));
  po.push_back(cmd->add_flag("--deterministic", opt->deterministic,
                             "bitwise-deterministic mode (DESIGN P7)"));
  po.push_back(cmd->add_option("--stats-gap", opt->stats_gap,
                               "elements of gap after each stats row (strided stats)")
                   ->check(CLI::NonNegativeNumber));
  po.push_back(cmd->add_option("--layout", opt->layout, "bhsd, or bshd for q k v o and grads")
                   ->check(CLI::IsMember({"bhsd", "bshd"})));
  cmd->footer(
      "Any problem option (--b .. --layout) times that one problem instead of a sweep; sizes not "
      "given are b 4, h-q 16, s-q 4096, d-qk 128 (16k tokens, hidden 2048). Exit status: 1 "
      "when a measurement failed (a decline is no failure) or no GPU is usable, non-zero for "
      "bad options.");
  cmd->callback([opt, &exit_code] { exit_code = bench(*opt); });
}

}  // namespace floe::tool
