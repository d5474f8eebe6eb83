// The floe command line, run as a process: exit codes, the per-case line, outputs in CASE/out/,
// messages that name the case for every kind of bad case, explain and its --arch routing,
// and a small demo.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "case_folder.h"
#include "floe/floe.h"
#include "support/cli_process.h"

namespace floe::tool {
namespace {

namespace fs = std::filesystem;

#ifdef FLOE_CLI
constexpr const char* kCli = FLOE_CLI;
#else
constexpr const char* kCli = nullptr;
#endif

using Ran = test::CliRun;

Ran floe(const std::string& args) {
  return test::run_cli(kCli, args);
}

std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kCli == nullptr) GTEST_SKIP() << "built without FLOE_CLI (tools off)";
    dir_ = fs::path(FLOE_BINARY_DIR) / "test_tmp" / "cli" /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  // A forward case with every input present, written through write_case.
  std::string good_case(const std::string& name, const Problem& p) const {
    ArrayMap inputs;
    for (const std::string& n : input_names(p)) {
      const TensorDesc& d = *p.tensor(tensor_of(n));
      HostArray a;
      a.shape.assign(d.dims.begin(), d.dims.begin() + d.rank);
      a.data.assign(static_cast<size_t>(a.numel()), 0.f);
      for (size_t i = 0; i < a.data.size(); ++i)
        a.data[i] = 0.01f * static_cast<float>(i % 31) - 0.1f;
      if (n == "seq_len_q" || n == "seq_len_kv") a.data.assign(a.data.size(), 1.f);
      inputs[n] = a;
    }
    const std::string d = (dir_ / name).string();
    EXPECT_TRUE(write_case(d, p, inputs).ok());
    return d;
  }
  static Problem small() {
    return Problem::forward({1, 2, 1, 4, 6, 8, 8}, DType::bf16).set_causal().set_stats();
  }

  fs::path dir_;
};

TEST_F(CliTest, NeedsACommand) {
  EXPECT_NE(floe("").code, 0);
  EXPECT_NE(floe("frobnicate").code, 0);
  EXPECT_NE(floe("run").code, 0);  // at least one case
  const Ran help = floe("--help");
  EXPECT_EQ(help.code, 0);
  for (const char* cmd : {"run", "explain", "demo"}) {
    EXPECT_NE(help.out.find(cmd), std::string::npos) << help.out;
  }
}

TEST_F(CliTest, RunWritesOutputsAndOneLinePerCase) {
  const std::string c = good_case("good", small());
  const Ran r = floe("run --device cpu " + c);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(first_line(r.out).rfind(c + ": engine reference, workspace ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(" bytes, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" ms"), std::string::npos) << r.out;
  Result<HostArray> o = read_npy(c + "/out/o.npy");
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->shape, (std::vector<int64_t>{1, 2, 4, 8}));
  Result<HostArray> stats = read_npy(c + "/out/stats.npy");
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->shape, (std::vector<int64_t>{1, 2, 4}));
}

TEST_F(CliTest, BackwardOutputsIncludeBiasAndSinkGradients) {
  const Problem p = Problem::backward({2, 2, 1, 3, 5, 8, 4}, DType::f16).set_bias(1, 2).set_sink();
  const std::string c = good_case("bwd", p);
  const Ran r = floe("run --device cpu " + c);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::vector<std::pair<const char*, std::vector<int64_t>>> want = {{"dq", {2, 2, 3, 8}},
                                                                          {"dk", {2, 1, 5, 8}},
                                                                          {"dv", {2, 1, 5, 4}},
                                                                          {"dbias", {1, 2, 3, 5}},
                                                                          {"dsink", {2}}};
  for (const auto& [name, shape] : want) {
    Result<HostArray> a = read_npy(c + "/out/" + name + ".npy");
    ASSERT_TRUE(a.ok()) << name << ": " << a.status().message();
    EXPECT_EQ(a->shape, shape) << name;
  }
}

TEST_F(CliTest, BadCasesAreNamedAndTheOthersStillRun) {
  const std::string good = good_case("good", small());

  // Invalid problem: h_q is not a multiple of h_kv.
  const std::string invalid =
      good_case("invalid", Problem::forward({1, 3, 2, 4, 4, 8, 8}, DType::bf16));
  // A missing input.
  const std::string missing = good_case("missing", small());
  fs::remove(missing + "/k.npy");
  // A misshaped input.
  const std::string misshaped = good_case("misshaped", small());
  HostArray wrong;
  wrong.shape = {1, 2, 4, 7};
  wrong.data.assign(56, 0.f);
  ASSERT_TRUE(write_npy(misshaped + "/q.npy", wrong).ok());
  // An unknown key in problem.json.
  const std::string unknown = good_case("unknown_key", small());
  {
    std::ifstream in(unknown + "/problem.json");
    nlohmann::json j = nlohmann::json::parse(in);
    j["causal"] = true;
    std::ofstream(unknown + "/problem.json") << j.dump();
  }
  // No such folder.
  const std::string nowhere = (dir_ / "nowhere").string();

  const Ran r = floe("run --device cpu " + invalid + " " + missing + " " + good + " " + misshaped +
                     " " + unknown + " " + nowhere);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("case " + invalid + " failed (invalid problem)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("h_kv"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("case " + missing + " failed"), std::string::npos) << r.out;
  EXPECT_NE(
      r.out.find(missing + "/k.npy: missing; the problem needs input 'k' of shape (1, 1, 6, 8)"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(misshaped + "/q.npy: shape (1, 2, 4, 7), the problem needs (1, 2, 4, 8)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(unknown + "/problem.json: key 'causal': unknown"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("case " + nowhere + " failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(good + ": engine reference"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("5 of 6 cases failed"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(good + "/out/o.npy"));
  EXPECT_FALSE(fs::exists(invalid + "/out/o.npy"));
}

TEST_F(CliTest, StaleOutputsGoWhenARunFails) {
  const std::string c = good_case("stale", small());
  ASSERT_EQ(floe("run --device cpu " + c).code, 0);
  ASSERT_TRUE(fs::exists(c + "/out/o.npy"));
  fs::remove(c + "/v.npy");
  EXPECT_EQ(floe("run --device cpu " + c).code, 1);
  EXPECT_FALSE(fs::exists(c + "/out/o.npy"));
}

TEST_F(CliTest, EnginePinning) {
  const std::string c = good_case("pin", small());
  const Ran bogus = floe("run --device cpu --engine bogus " + c);
  EXPECT_EQ(bogus.code, 1);
  EXPECT_NE(bogus.out.find("'bogus' is not an engine"), std::string::npos) << bogus.out;
  const Ran gpu_only = floe("run --device cpu --engine generic " + c);
  EXPECT_EQ(gpu_only.code, 1);
  EXPECT_NE(gpu_only.out.find("case " + c + " failed (not supported)"), std::string::npos)
      << gpu_only.out;
  const Ran ref = floe("run --device cpu --engine reference " + c);
  EXPECT_EQ(ref.code, 0) << ref.out;
}

TEST_F(CliTest, CudaWithoutADeviceIsRefusedByCase) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  const std::string c = good_case("cuda", small());
  const Ran r = floe("run --device cuda " + c);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("case " + c + " failed"), std::string::npos) << r.out;
  // Without --device, a machine with no GPU runs on the CPU.
  const Ran dflt = floe("run " + c);
  EXPECT_EQ(dflt.code, 0) << dflt.out;
  EXPECT_NE(dflt.out.find("engine reference"), std::string::npos) << dflt.out;
}

TEST_F(CliTest, ExplainOnTheCpu) {
  const std::string c = good_case("explain", small());
  const Ran r = floe("explain --device cpu " + c);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(first_line(r.out), "engine: reference");
  // One line per engine, each with its verdict.
  for (const std::string& name : engine_names()) {
    EXPECT_NE(r.out.find("  " + name + ": "), std::string::npos) << name << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("  reference: accepted"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  generic: declined: "), std::string::npos) << r.out;
  // explain needs problem.json only.
  fs::remove(c + "/q.npy");
  EXPECT_EQ(floe("explain --device cpu " + c).code, 0);
}

TEST_F(CliTest, ExplainRoutesByArchitectureWithoutAGpu) {
  // The hand-written cases cover most features; every one must be served on both
  // architectures (P5: the generic engine at worst), never by the CPU reference.
  for (const auto& entry : fs::directory_iterator(FLOE_CASES_DIR)) {
    for (const char* arch : {"sm_80", "sm_90"}) {
      const Ran r = floe(std::string("explain --arch ") + arch + " " + entry.path().string());
      ASSERT_EQ(r.code, 0) << entry.path() << " " << arch << "\n" << r.out;
      const std::string line = first_line(r.out);
      ASSERT_EQ(line.rfind("engine: ", 0), 0u) << r.out;
      const std::string engine = line.substr(8);
      EXPECT_NE(engine, "reference") << r.out;
      EXPECT_NE(r.out.find("  reference: declined: runs on the CPU only"), std::string::npos)
          << r.out;
      // Hopper-only engines never serve Ampere.
      if (std::string(arch) == "sm_80") EXPECT_NE(engine.rfind("sm90", 0), 0u) << r.out;
    }
  }
  const std::string c = good_case("arch", small());
  EXPECT_EQ(floe("explain --arch sm_80 " + c).out.rfind("engine: ", 0), 0u);
  const Ran bad = floe("explain --arch ampere " + c);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("--arch ampere: must look like sm_80"), std::string::npos) << bad.out;
  EXPECT_NE(floe("explain --arch sm_80 --device cpu " + c).code, 0);  // one or the other
}

TEST_F(CliTest, ExplainNamesAnInvalidCase) {
  const std::string c = good_case("invalid", Problem::forward({1, 3, 2, 4, 4, 8, 8}, DType::bf16));
  const Ran r = floe("explain --device cpu " + c);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("case " + c), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("h_kv"), std::string::npos) << r.out;
}

TEST_F(CliTest, SmallDemo) {
  const Ran r = floe("demo --device cpu --b 1 --h-q 4 --h-kv 2 --s 64 --d 32");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("forward: engine reference, workspace "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("backward: engine reference, workspace "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("checksum "), std::string::npos) << r.out;
  // Seeded: the same numbers every time.
  const Ran again = floe("demo --device cpu --b 1 --h-q 4 --h-kv 2 --s 64 --d 32");
  auto checksums = [](const std::string& s) {
    std::string out;
    for (size_t p = s.find("checksum "); p != std::string::npos; p = s.find("checksum ", p + 1)) {
      out += s.substr(p, s.find('(', p) - p);
    }
    return out;
  };
  EXPECT_EQ(checksums(again.out), checksums(r.out));
}

}  // namespace
}  // namespace floe::tool
