#include "support/harness_env.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

namespace floe::test {

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : fallback;
}

// A malformed variable is a mistake in the command that ran the tests: say so loudly rather
// than silently testing something else.
[[noreturn]] void bad_env(const std::string& name, const std::string& value, const char* want) {
  std::fprintf(stderr, "floe harness: %s=%s: must be %s\n", name.c_str(), value.c_str(), want);
  std::exit(2);
}

// The build folder: the nearest folder above the running test that holds CMakeCache.txt (the
// support library is built once for every test, so it cannot bake the path in).
std::string find_build_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string dir = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string(".");
  for (int up = 0; up < 5; ++up) {
    const size_t slash = dir.find_last_of('/');
    if (slash == std::string::npos || slash == 0) break;
    dir.resize(slash);
    if (access((dir + "/CMakeCache.txt").c_str(), F_OK) == 0) return dir;
  }
  return ".";
}

uint64_t parse_seed(const std::string& s) {
  try {
    size_t used = 0;
    const uint64_t v = std::stoull(s, &used, 0);  // base 0: decimal or 0x-hex
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  bad_env("FLOE_SEED", s, "an unsigned integer, decimal or 0x-hex");
}

HarnessSettings read_settings() {
  HarnessSettings s;
  s.level = env_or("FLOE_BATTERY", "quick");
  if (s.level == "smoke") {
    s.forward_cases = s.backward_cases = 16;
  } else if (s.level == "quick") {
    s.forward_cases = s.backward_cases = 300;
  } else if (s.level == "full") {
    s.forward_cases = s.backward_cases = 3000;
  } else {
    bad_env("FLOE_BATTERY", s.level, "smoke, quick or full");
  }
  const std::string cases = env_or("FLOE_BATTERY_CASES", "");
  if (!cases.empty()) {
    char* end = nullptr;
    const long n = std::strtol(cases.c_str(), &end, 10);
    if (*end != '\0' || n < 0) bad_env("FLOE_BATTERY_CASES", cases, "a non-negative integer");
    s.forward_cases = s.backward_cases = static_cast<int>(n);
  }
  s.seed = parse_seed(env_or("FLOE_SEED", std::to_string(kDefaultSeed)));
  s.engine = env_or("FLOE_ENGINE", "auto");
  s.report_file = env_or("FLOE_REPORT_FILE", "");
  s.aligned_layouts = env_or("FLOE_LAYOUT", "any") == "aligned";
  s.directions = env_or("FLOE_DIRECTIONS", "both");
  const std::string smem = env_or("FLOE_SMEM_LIMIT_KB", "0");
  {
    char* end = nullptr;
    const long kb = std::strtol(smem.c_str(), &end, 10);
    if (*end != '\0' || kb < 0 || kb > (1 << 20)) {
      bad_env("FLOE_SMEM_LIMIT_KB", smem, "a number of KB (0: the device's limit)");
    }
    s.smem_limit_kb = static_cast<int>(kb);
  }
  const std::string dims = env_or("FLOE_HEAD_DIMS", "");
  if (!dims.empty()) {
    char* end = nullptr;
    const long dqk = std::strtol(dims.c_str(), &end, 10);
    const long dv = *end == '/' ? std::strtol(end + 1, &end, 10) : 0;
    if (*end != '\0' || dqk < 1 || dv < 1 || dqk > 256 || dv > 256) {
      bad_env("FLOE_HEAD_DIMS", dims, "DQK/DV, each 1 to 256 (e.g. 192/128)");
    }
    s.head_dim_qk = dqk;
    s.head_dim_v = dv;
  }
  std::string features = env_or("FLOE_FEATURES", "");
  for (size_t at = 0; !features.empty() && at <= features.size();) {
    const size_t comma = std::min(features.find(',', at), features.size());
    const std::string f = features.substr(at, comma - at);
    if (f.empty() || f == "-") bad_env("FLOE_FEATURES", features, "F1,F2,-F3 (feature names)");
    s.features.push_back(f);
    at = comma + 1;
  }
  const std::string keys = env_or("FLOE_KEYS_MULTIPLE", "1");
  {
    char* end = nullptr;
    const long m = std::strtol(keys.c_str(), &end, 10);
    if (*end != '\0' || m < 1 || m > 256) bad_env("FLOE_KEYS_MULTIPLE", keys, "1 to 256");
    s.keys_multiple = m;
  }
  const std::string bias_grad = env_or("FLOE_BIAS_GRAD", "1");
  if (bias_grad != "0" && bias_grad != "1") bad_env("FLOE_BIAS_GRAD", bias_grad, "0 or 1");
  s.bias_grad = bias_grad == "1";
  s.failure_dir = env_or("FLOE_FAILURE_DIR", build_dir() + "/failures/" + seed_string(s.seed));
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const std::string threads = env_or("FLOE_HARNESS_THREADS", std::to_string(hw));
  char* end = nullptr;
  const long t = std::strtol(threads.c_str(), &end, 10);
  if (*end != '\0' || t < 1) bad_env("FLOE_HARNESS_THREADS", threads, "a positive integer");
  s.threads = static_cast<int>(std::min<long>(t, 64));
  return s;
}

}  // namespace

const HarnessSettings& harness_settings() {
  static const HarnessSettings settings = read_settings();
  return settings;
}

const std::string& build_dir() {
  static const std::string dir = find_build_dir();
  return dir;
}

std::string floe_cli_path() {
  return build_dir() + "/tools/floe/floe";
}

std::string seed_string(uint64_t seed) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(seed));
  return buf;
}

}  // namespace floe::test
