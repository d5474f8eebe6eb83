// What `floe bench` says about its measurements: a progress line per problem, the table at
// the end, and the JSON that bench/peers.py and scripts/perf-report.py read.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_problems.h"
#include "bench_runner.h"

namespace floe::tool {

// One problem x direction x requested engine.
struct BenchRecord {
  BenchProblem problem;
  Direction direction = Direction::forward;
  std::string engine_requested = "auto";
  Measurement m;
  FlopCount flops;

  // FLOPs over the median (or the fastest) call; 0 unless status is ok.
  double tflops() const;
  double tflops_best() const;
  // K+V bytes read (kv_bytes_read) over the median call; 0 unless a paged problem ran.
  double tb_per_s() const;
};

struct HostRecord {
  BenchProblem problem;
  Direction direction = Direction::forward;
  HostOverhead h;
};

// "fwd b4 h16 s4096 d128 [auto]: sm80, ws 0 B, 1.234 ms (min 1.200), 456.7 TFLOP/s"
std::string progress_line(const BenchRecord& r);
// The table of every record, then the host overhead.
void print_table(std::FILE* out, const std::vector<BenchRecord>& records,
                 const std::vector<HostRecord>& host);

nlohmann::json record_json(const BenchRecord& r);
nlohmann::json host_json(const HostRecord& h);

}  // namespace floe::tool
