// The seeded random battery (DESIGN §5): N random cases per direction over every axis of §2,
// each run by the engine under test on the GPU through tool::run_case (the path `floe run`
// takes: declared strides, NaN-poisoned gaps and outputs, canaries checked) and by the fp64
// reference on the host with the same rounded inputs, compared element by element with the
// tolerances of harness_tolerance.h. Every failure leaves a case folder and the `floe run`
// command that reproduces it.
//
//   FLOE_BATTERY=smoke|quick|full  FLOE_SEED=N  FLOE_ENGINE=auto|NAME  FLOE_FAILURE_DIR=DIR
//   FLOE_SMEM_LIMIT_KB=99|163 (the tiles of sm_86/sm_89 or the A100 on this GPU)
//   (see support/harness_env.h)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/harness_compare.h"
#include "support/harness_env.h"
#include "support/harness_failure.h"
#include "support/harness_gpu_test.h"
#include "support/harness_random_problem.h"
#include "support/harness_rng.h"
#include "support/harness_runner.h"

namespace floe::test {
namespace {

enum class Verdict { pass, fail, declined };

struct Outcome {
  Verdict verdict = Verdict::pass;
  std::string engine;   // the engine that ran it on the GPU
  std::string kernel;   // its kernel, as explain names it (empty: the engine names none)
  std::string message;  // why it failed or was declined
  std::vector<std::string> features;
};

// Everything the battery learned, for the summary.
struct Tally {
  std::mutex mu;
  int passed = 0, failed = 0, declined = 0;
  std::map<std::string, int> engines;
  std::map<std::string, int> kernels;  // which tiles ran (FLOE_SMEM_LIMIT_KB picks others)
  // name -> cases drawn, cases an engine ran (not declined: what a pinned engine was tested on),
  // failures
  struct FeatureCount {
    int cases = 0, ran = 0, failed = 0;
  };
  std::map<std::string, FeatureCount> features;
  std::map<std::string, int> decline_reasons;
  std::vector<std::string> failures;  // the first few messages, each with its command

  void add(const Outcome& o) {
    std::lock_guard<std::mutex> lock(mu);
    switch (o.verdict) {
      case Verdict::pass:
        ++passed;
        break;
      case Verdict::fail:
        ++failed;
        break;
      case Verdict::declined:
        ++declined;
        break;
    }
    if (o.verdict != Verdict::declined) ++engines[o.engine.empty() ? "?" : o.engine];
    if (o.verdict != Verdict::declined && !o.kernel.empty()) ++kernels[o.kernel];
    if (o.verdict == Verdict::declined) ++decline_reasons[o.message];
    for (const std::string& f : o.features) {
      ++features[f].cases;
      if (o.verdict != Verdict::declined) ++features[f].ran;
      if (o.verdict == Verdict::fail) ++features[f].failed;
    }
    if (o.verdict == Verdict::fail && failures.size() < 10) failures.push_back(o.message);
  }
};

Outcome run_one(int index, uint64_t seed, Direction dir, const GeneratorLimits& limits,
                const HarnessSettings& s) {
  Outcome out;
  const char* op = dir == Direction::forward ? "fwd" : "bwd";
  const std::string name = std::string(op) + "-" + std::to_string(index) + "-" + seed_string(seed);
  Result<GeneratedCase> g = generate_case(seed, dir, limits);
  if (!g) {
    out.verdict = Verdict::fail;
    out.message = name + ": could not generate the case (seed " + seed_string(seed) +
                  "): " + g.status().message();
    return out;
  }
  tool::Case& c = g->c;
  c.dir = s.failure_dir + "/" + name;
  out.features = g->features;
  const std::string what = name + " [" + describe(c.json) + "]";

  Result<tool::RunResult> run = tool::run_case(c, s.engine, tool::Memory::device, s.smem_limit_kb);
  if (!run) {
    // A pinned engine may decline a problem (P4); with "auto" something must serve it (P5).
    if (declined_by_pinned_engine(run.status())) {
      out.verdict = Verdict::declined;
      out.message = run.status().message();
      return out;
    }
    out.verdict = Verdict::fail;
    const std::string msg = what + "\n  run_case on the GPU failed: " + run.status().message();
    out.message = msg + "\n  reproduce: " + write_failure(s.failure_dir, name, c, s.engine, msg);
    return out;
  }
  out.engine = run->engine;
  out.kernel = run->kernel;
  Result<tool::ArrayMap> ref = run_reference(c);
  if (!ref) {
    out.verdict = Verdict::fail;
    const std::string msg = what + "\n  the reference failed: " + ref.status().message();
    out.message = msg + "\n  reproduce: " + write_failure(s.failure_dir, name, c, s.engine, msg);
    return out;
  }
  const Comparison cmp = compare_outputs(c, run->outputs, *ref);
  if (!cmp.ok()) {
    out.verdict = Verdict::fail;
    const std::string msg = what + " engine " + run->engine + ": " + cmp.summary();
    out.message = msg + "  reproduce: " +
                  write_failure(s.failure_dir, name, c, s.engine, msg, &run->outputs, &*ref);
  }
  return out;
}

void run_battery(Direction dir, int count) {
  const HarnessSettings& s = harness_settings();
  const GeneratorLimits limits = generator_limits(s.level);
  const char* op = dir == Direction::forward ? "forward" : "backward";
  if (count == 0) GTEST_SKIP() << "no " << op << " cases at this level";

  Tally tally;
  std::atomic<int> next{0};
  const auto start = std::chrono::steady_clock::now();
  // One worker per core: each generates a case (a backward one runs the reference forward),
  // runs it on the GPU and on the fp64 reference, and compares. The GPU is shared; the
  // reference is what costs.
  auto worker = [&] {
    for (int i = next++; i < count; i = next++) {
      const uint64_t seed = case_seed(s.seed, dir == Direction::forward ? 1 : 2, i);
      tally.add(run_one(i, seed, dir, limits, s));
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < std::min(s.threads, count); ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::string engines;
  for (const auto& [e, n] : tally.engines) {
    engines += (engines.empty() ? "" : ", ") + e + " " + std::to_string(n);
  }
  char line[512];
  std::snprintf(line, sizeof line,
                "[battery] %s: level %s, seed %s, engine %s: %d cases, %d passed, %d failed, "
                "%d declined in %.1f s (ran on: %s)\n",
                op, s.level.c_str(), seed_string(s.seed).c_str(), s.engine.c_str(), count,
                tally.passed, tally.failed, tally.declined, seconds,
                engines.empty() ? "none" : engines.c_str());
  std::string report = line;
  if (s.smem_limit_kb > 0) {
    report += std::string("[battery] ") + op + ": planned for " + std::to_string(s.smem_limit_kb) +
              " KB of shared memory per block (FLOE_SMEM_LIMIT_KB)\n";
  }
  if (!tally.kernels.empty()) {
    report += std::string("[battery] ") + op + " kernels:";
    for (const auto& [k, n] : tally.kernels) report += " " + k + " " + std::to_string(n) + ",";
    report.back() = '\n';
  }
  report +=
      std::string("[battery] ") + op + " cases per feature, run (not declined), (failures):\n";
  for (const auto& [f, n] : tally.features) {
    std::snprintf(line, sizeof line, "  %-24s %5d %5d run", f.c_str(), n.cases, n.ran);
    report += line;
    if (n.failed) report += " (" + std::to_string(n.failed) + " failed)";
    report += "\n";
  }
  for (const auto& [reason, n] : tally.decline_reasons) {
    report += "[battery] declined " + std::to_string(n) + " x: " + reason + "\n";
  }
  if (tally.failed > 0) report += "[battery] failing cases are in " + s.failure_dir + "\n";
  std::fputs(report.c_str(), stdout);
  std::fflush(stdout);
  if (!s.report_file.empty()) {
    if (FILE* f = std::fopen(s.report_file.c_str(), "a")) {
      std::fputs(report.c_str(), f);
      std::fclose(f);
    }
  }

  std::string first;
  for (const std::string& f : tally.failures) first += f + "\n";
  EXPECT_EQ(tally.failed, 0) << tally.failed << " of " << count << " " << op
                             << " cases failed; the first:\n"
                             << first;
  if (s.engine != "auto") {
    EXPECT_GT(tally.passed + tally.failed, 0)
        << "engine " << s.engine << " declined every " << op << " case: nothing was tested";
  } else {
    EXPECT_EQ(tally.declined, 0);
  }
}

class Battery : public GpuTest {};

TEST_F(Battery, Forward) {
  run_battery(Direction::forward, harness_settings().forward_cases);
}

TEST_F(Battery, Backward) {
  run_battery(Direction::backward, harness_settings().backward_cases);
}

}  // namespace
}  // namespace floe::test
