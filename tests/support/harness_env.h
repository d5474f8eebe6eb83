// What the GPU harness reads from the environment, read in one place so that every test and
// every failure message agrees on it.
//
//   FLOE_BATTERY         smoke (16+16, small) | quick (default, 300+300) | full (3000+3000)
//   FLOE_BATTERY_CASES   overrides the number of cases per direction
//   FLOE_SEED            base seed, decimal or 0x-hex (default kDefaultSeed)
//   FLOE_ENGINE          the engine under test: auto (the plan's choice) or a name
//   FLOE_FAILURE_DIR     where failing cases are written (default BUILD/failures/SEED)
//   FLOE_HARNESS_THREADS host threads for the battery (default: the hardware's)
//   FLOE_REPORT_FILE     the battery appends its summary there too (scripts/gpu-check.sh)
//   FLOE_DIRECTIONS      both (default) | fwd | bwd: the GPU tests of the other direction skip,
//                        so an engine that serves one direction can be pinned for all tests
//   FLOE_LAYOUT          any (default): every stride pattern; aligned: the layouts tensor-core
//                        engines serve (unit innermost stride, outer strides multiples of 8),
//                        so that a pinned fast engine meets most cases instead of declining
//   FLOE_SMEM_LIMIT_KB   plan as if the GPU allowed at most this many KB of shared memory per
//                        block (sm_86/sm_89: 99, A100: 163): the engines pick the tiles of that
//                        part and they run on this one (the battery, and every test planning
//                        through build_plan); unset or 0: the device's own limit
//   FLOE_HEAD_DIMS       DQK/DV (e.g. 192/128): every random case takes these head dims (drawn
//                        as usual, then replaced, so the rest of each case is the same), to
//                        test one tile of a pinned engine; unset: random head dims
//   FLOE_FEATURES        F1,F2,-F3: every random case has the features F1 and F2 and not F3
//                        (the battery's feature names, e.g. "bias,-bias b-broadcast"), drawn
//                        again from the case's seed until it has; unset: every case
//   FLOE_KEYS_MULTIPLE   N: every random case's s_kv a multiple of N (drawn, then rounded), so
//                        that a bias's packed rows are whole 16-byte pieces (N = 8), as sm90's
//                        bias kernels need; unset: any s_kv
//   FLOE_BIAS_GRAD       0: a backward case with a bias declares no dBias (a bias that needs no
//                        gradient; feature "bias without dbias"); its failure folder's
//                        problem.json, which has no such key, reproduces it with dBias
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace floe::test {

inline constexpr uint64_t kDefaultSeed = 20240611;

struct HarnessSettings {
  std::string level = "quick";
  uint64_t seed = kDefaultSeed;
  std::string engine = "auto";
  std::string failure_dir;
  int threads = 1;
  int forward_cases = 300;
  int backward_cases = 300;
  std::string report_file;  // empty: stdout only
  bool aligned_layouts = false;
  std::string directions = "both";
  int smem_limit_kb = 0;                    // 0: the device's
  int64_t head_dim_qk = 0, head_dim_v = 0;  // FLOE_HEAD_DIMS; 0: random
  std::vector<std::string> features;        // FLOE_FEATURES: wanted, or "-" and unwanted
  bool bias_grad = true;                    // FLOE_BIAS_GRAD
  int64_t keys_multiple = 1;                // FLOE_KEYS_MULTIPLE
};

// Reads the variables above once; later calls return the same settings.
const HarnessSettings& harness_settings();

// The build folder the running test belongs to.
const std::string& build_dir();
// The floe command line built beside the tests, for reproduction commands.
std::string floe_cli_path();

// Hex with 0x, as FLOE_SEED accepts it.
std::string seed_string(uint64_t seed);

}  // namespace floe::test
