// How `floe bench` times one problem on the GPU: the plan built on Target::cuda(), tensors in
// cudaMalloc'd memory filled with seeded random values, the plan's exact workspace, warm-ups,
// then CUDA events around each single execute (DESIGN §6). Small problems rotate among several
// input sets so that they time the kernels, not a warm L2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench_problems.h"
#include "floe/plan.h"
#include "floe/status.h"
#include "floe/target.h"

namespace floe::tool {

struct BenchSettings {
  int warmups = 3;
  int calls = 20;
  // A problem whose single call is slow gets fewer timed calls (never fewer than
  // kMinCalls) so that its timed calls take about this long; keeps a slow engine's sweep
  // short. Fast engines always get `calls`.
  double budget_ms = 1000;
  uint64_t seed = 2024;
  // > 0: planned as if the device allowed at most this many KB of shared memory per block (the
  // tiles of a smaller part, timed on this one).
  int smem_limit_kb = 0;
  // Decodes (BenchProblem::decode): each input set's execute() captured once into a CUDA graph
  // and the graphs replayed, as a server runs its decode step; false: direct executes.
  bool graph = true;
};

inline constexpr int kMinCalls = 5;
// Working sets below this many bytes rotate among input sets; H200's L2 is 50 MB (60 MB
// leaves a margin).
inline constexpr size_t kL2Bytes = size_t{60} << 20;

struct Measurement {
  std::string status = "ok";  // ok | declined (the engine said why) | error
  std::string reason;         // why declined or what failed
  std::string engine;         // the engine that served
  size_t workspace_bytes = 0;
  size_t working_set_bytes = 0;  // every tensor's span plus the workspace, one input set
  int input_sets = 1;
  int warmups = 0;
  bool graph = false;      // timed as replayed CUDA graphs (else direct executes)
  std::vector<double> ms;  // one per timed call, in call order
  double median_ms = 0;
  double min_ms = 0;
};

struct HostOverhead {
  std::string status = "ok";
  std::string reason;
  std::string engine;
  int calls = 0;
  double median_us = 0;
  double min_us = 0;
};

struct DeviceInfo {
  std::string name;
  int arch = 0;
  int sm_count = 0;
  int runtime_version = 0;
  int driver_version = 0;
};

class BenchRunner {
 public:
  // Fails where no CUDA device is usable.
  static Result<std::unique_ptr<BenchRunner>> create(const BenchSettings& settings);
  ~BenchRunner();
  BenchRunner(const BenchRunner&) = delete;
  BenchRunner& operator=(const BenchRunner&) = delete;

  // engine: "auto" or an engine's name. A backward first runs the forward (engine auto) on
  // every input set to produce O and stats.
  Measurement measure(const BenchProblem& bp, Direction dir, const std::string& engine);
  // Host time of one execute() (steady_clock around the call, no sync), median of `calls`.
  HostOverhead host_overhead(const BenchProblem& bp, Direction dir, int calls);

  const DeviceInfo& device() const { return device_; }

  struct Impl;

 private:
  BenchRunner() = default;
  std::unique_ptr<Impl> impl_;
  DeviceInfo device_;
};

// The median of the values (the mean of the middle two for an even count); 0 when empty.
double median_of(std::vector<double> values);

}  // namespace floe::tool
