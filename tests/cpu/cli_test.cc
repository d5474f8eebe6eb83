// The floe command line, run as a process: exit codes, the per-case line, outputs in CASE/out/,
// messages that name the case for every kind of bad case, explain and its --arch routing,
// and a small demo.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
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
  EXPECT_NE(r.out.find("case " + invalid + " refused (invalid problem)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("h_kv"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("case " + missing + " refused"), std::string::npos) << r.out;
  EXPECT_NE(
      r.out.find(missing + "/k.npy: missing; the problem needs input 'k' of shape (1, 1, 6, 8)"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(misshaped + "/q.npy: shape (1, 2, 4, 7), the problem needs (1, 2, 4, 8)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(unknown + "/problem.json: key 'causal': unknown"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("case " + nowhere + " refused"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(good + ": engine reference"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("floe run: 6 cases: 1 ran, 5 refused, 0 failed"), std::string::npos)
      << r.out;
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
  EXPECT_NE(gpu_only.out.find("case " + c + " refused (not supported)"), std::string::npos)
      << gpu_only.out;
  const Ran ref = floe("run --device cpu --engine reference " + c);
  EXPECT_EQ(ref.code, 0) << ref.out;
}

TEST_F(CliTest, CudaWithoutADeviceIsRefusedByCase) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  const std::string c = good_case("cuda", small());
  const Ran r = floe("run --device cuda " + c);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("case " + c + " "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 cases: 0 ran"), std::string::npos) << r.out;
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

// sm80's tile follows the part's shared memory per block: explain names it in the plan line, or
// in the reason when the ci kernel set lacks it (docs/support-matrix.md, "sm80's tiles by part").
TEST_F(CliTest, ExplainNamesSm80sTileForEachPartClass) {
  struct Want {
    int d;
    const char* arch;
    const char* tile;  // as the plan line or sm80's reason names it
  };
  const std::vector<Want> wants = {{128, "sm_80", "tile d128,"},   {128, "sm_86", "tile d128q1,"},
                                   {128, "sm_89", "tile d128q1,"}, {256, "sm_80", "tile d256q1,"},
                                   {64, "sm_86", "tile d64m64,"},  {256, "sm_86", "tile d256m32,"}};
  for (const Want& w : wants) {
    const std::string c = good_case("bwd" + std::to_string(w.d) + w.arch,
                                    Problem::backward({1, 2, 2, 64, 64, w.d, w.d}, DType::bf16));
    const Ran r = floe(std::string("explain --arch ") + w.arch + " " + c);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find(w.tile), std::string::npos) << w.arch << " d" << w.d << "\n" << r.out;
  }
  // floe run --smem-limit-kb: a positive number of KB.
  const std::string c = good_case("limit", small());
  EXPECT_EQ(floe("run --device cpu --smem-limit-kb 99 " + c).code, 0);
  const Ran bad = floe("run --device cpu --smem-limit-kb -4 " + c);
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--smem-limit-kb"), std::string::npos) << bad.out;
}

TEST_F(CliTest, ExplainNamesAnInvalidCase) {
  const std::string c = good_case("invalid", Problem::forward({1, 3, 2, 4, 4, 8, 8}, DType::bf16));
  const Ran r = floe("explain --device cpu " + c);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("case " + c), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("h_kv"), std::string::npos) << r.out;
}

TEST_F(CliTest, SmallDemo) {
  const Ran r = floe("demo --device cpu --b 2 --h-q 4 --h-kv 2 --s 64 --d 32");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("forward: engine reference, workspace "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("backward: engine reference, workspace "), std::string::npos) << r.out;
  // The error against the reference engine on sampled rows, for every output: 2 batches x 2
  // heads x 4 rows of o, stats and dq; 2 (batch, kv head) x 3 keys of dk and dv.
  EXPECT_EQ(r.out.find("checksum"), std::string::npos) << r.out;
  for (const char* want :
       {"forward against the reference engine (fp64) on sampled rows:", "o max |error| ",
        "stats max |error| ", "backward against the reference engine (fp64) on sampled rows:",
        "dq max |error| ", "dk max |error| ", "dv max |error| "}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("16 rows)  stats"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("6 rows)  dv"), std::string::npos) << r.out;
  // On the reference engine the sliced problems give the very same values, up to bf16
  // rounding of the outputs: every error is tiny, none is NaN.
  for (size_t p = r.out.find("|error| "); p != std::string::npos;
       p = r.out.find("|error| ", p + 1)) {
    const double e = std::stod(r.out.substr(p + 8, 9));
    EXPECT_LT(e, 2e-2) << r.out;
  }
  // Seeded: the same numbers every time.
  const Ran again = floe("demo --device cpu --b 2 --h-q 4 --h-kv 2 --s 64 --d 32");
  auto errors = [](const std::string& s) { return s.substr(s.find("forward against")); };
  EXPECT_EQ(errors(again.out), errors(r.out));
}

// ------------------------------------------------------------------------------ issue 11

// Exit status 134 (abort) or any signal: what no input may cause.
void expect_no_abort(const Ran& r, const std::string& what) {
  EXPECT_NE(r.code, -1) << what << ": killed by a signal\n" << r.out;
  EXPECT_NE(r.code, 134) << what << ": aborted\n" << r.out;
  EXPECT_NE(r.code, 0) << what << ": accepted\n" << r.out;
  EXPECT_EQ(r.out.find("terminate called"), std::string::npos) << what << "\n" << r.out;
}

// Every kind of bad case between two good ones: a message naming the case and the fault,
// the next case still runs, and the run ends with a summary (item 2). Each of these used to
// abort floe (exit 134) and so lose the third case, or was accepted.
TEST_F(CliTest, NoBadCaseAbortsARunOrStopsTheNextCase) {
  const std::string first = good_case("first", small());
  const std::string last = good_case("last", small());
  const int64_t big = std::numeric_limits<int64_t>::max();
  auto with_json = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    const std::string c = good_case(name, small());
    std::ifstream in(c + "/problem.json");
    nlohmann::json j = nlohmann::json::parse(in);
    edit(j);
    std::ofstream(c + "/problem.json") << j.dump();
    return c;
  };
  auto with_text = [&](const std::string& name, const std::string& text) {
    const std::string c = good_case(name, small());
    std::ofstream(c + "/problem.json") << text;
    return c;
  };
  const std::string shape =
      R"("op": "fwd", "dtype": "bf16", "b": 1, "h_q": 2, "h_kv": 1, "s_q": 4, "s_kv": 6, "d_qk": 8, "d_v": 8, "stats": true, "mask": {"right": 0})";
  struct Bad {
    std::string kind, dir, needle;
  };
  std::vector<Bad> bad = {
      {"json number out of range", with_text("scale_1e400", "{" + shape + R"(, "scale": 1e400})"),
       "not valid JSON"},
      {"json number out of range",
       with_text("softcap_-1e400", "{" + shape + R"(, "softcap": -1e400})"), "not valid JSON"},
      {"json number out of range", with_text("b_1e400", R"({"b": 1e400, )" + shape.substr(0) + "}"),
       "not valid JSON"},
      {"json duplicate key", with_text("dup_op", R"({"op": "bwd", )" + shape + "}"),
       "key 'op' appears twice"},
      {"json duplicate key", with_text("dup_mask", "{" + shape + R"(, "mask": {"left": 1}})"),
       "key 'mask' appears twice"},
      {"stride span overflow",
       with_json("stride_max",
                 [&](nlohmann::json& j) {
                   j["b"] = 2;
                   j["strides"]["q"] = {big, 32, 8, 1};
                 }),
       "64-bit"},
      {"stride span overflow",
       with_json("stride_sum",
                 [&](nlohmann::json& j) {
                   j["strides"]["k"] = {big / 2, big / 2, big / 4, 1};
                 }),
       "64-bit"},
      {"stride span overflow",
       with_json("stride_bytes",
                 [&](nlohmann::json& j) {
                   j["b"] = 2;
                   j["strides"]["o"] = {big / 2, 32, 8, 1};
                 }),
       "64-bit"},
      {"size product overflow",
       with_json("dims_max",
                 [](nlohmann::json& j) {
                   for (const char* k : {"b", "h_q", "h_kv", "s_q", "s_kv", "d_qk", "d_v"}) {
                     j[k] = (int64_t{1} << 31) - 1;
                   }
                 }),
       "tensor 'q': the product of b h_q s_q d_qk overflows 64 bits"},
      {"size product overflow",
       with_json("zero_outside",
                 [](nlohmann::json& j) {
                   j["b"] = 0;  // zero further out: the inner product still overflows
                   j["s_q"] = int64_t{1} << 40;
                   j["h_q"] = int64_t{1} << 40;
                 }),
       "overflows 64 bits"},
      {"size product overflow",
       with_json("bias_dims",
                 [](nlohmann::json& j) {
                   j["bias"] = {int64_t{1} << 40, int64_t{1} << 40};
                 }),
       "tensor 'bias': the product of bias[0] bias[1] s_q s_kv overflows 64 bits"},
      {"problem checked first", with_json("b_0", [](nlohmann::json& j) { j["b"] = 0; }), "b"},
      {"problem checked first", with_json("h_kv_bad", [](nlohmann::json& j) { j["h_kv"] = 3; }),
       "h_kv"},
      {"problem checked first", with_json("s_q_neg", [](nlohmann::json& j) { j["s_q"] = -2; }),
       "s_q"},
  };
  {
    const std::string c = good_case("json_dir", small());
    fs::remove(c + "/problem.json");
    fs::create_directories(c + "/problem.json");
    bad.push_back({"directory for a file", c, "problem.json: is a directory"});
  }
  {
    const std::string c = good_case("npy_dir", small());
    fs::remove(c + "/k.npy");
    fs::create_directories(c + "/k.npy");
    bad.push_back({"directory for a file", c, "k.npy: is a directory"});
  }
  {
    const std::string c = (dir_ / "a_file").string();
    std::ofstream(c) << "{}";
    bad.push_back({"file for a folder", c, "not a folder"});
  }
  for (const char* dev : {"/dev/zero", "/dev/urandom"}) {
    if (!fs::exists(dev)) continue;
    const std::string c = good_case(std::string("v_") + (dev + 5), small());
    fs::remove(c + "/v.npy");
    fs::create_symlink(dev, c + "/v.npy");
    bad.push_back({"endless file", c, "v.npy: magic"});
  }
  if (fs::exists("/dev/zero")) {
    const std::string c = good_case("json_zero", small());
    fs::remove(c + "/problem.json");
    fs::create_symlink("/dev/zero", c + "/problem.json");
    bad.push_back({"endless file", c, "larger than"});
  }
  {
    const std::string c = good_case("unused_bias", small());
    HostArray b;
    b.shape = {1, 2, 4, 6};
    b.data.assign(48, 0.f);
    ASSERT_TRUE(write_npy(c + "/bias.npy", b).ok());
    bad.push_back({"unused input", c, "bias.npy: the problem does not read an input 'bias'"});
  }
  {
    const std::string c = good_case("unused_dq", small());
    HostArray b;
    b.shape = {1};
    b.data.assign(1, 0.f);
    ASSERT_TRUE(write_npy(c + "/dq.npy", b).ok());
    bad.push_back({"unused input", c, "dq.npy: the problem does not read"});
  }

  for (const Bad& b : bad) {
    fs::remove_all(last + "/out");
    const Ran r = floe("run --device cpu " + first + " " + b.dir + " " + last);
    expect_no_abort(r, b.kind + " " + b.dir);
    EXPECT_EQ(r.code, 1) << b.dir << "\n" << r.out;
    EXPECT_NE(r.out.find("case " + b.dir + " refused"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(b.needle), std::string::npos) << b.needle << "\n" << r.out;
    EXPECT_NE(r.out.find(last + ": engine reference"), std::string::npos) << r.out;
    EXPECT_TRUE(fs::exists(last + "/out/o.npy")) << b.dir;
    EXPECT_NE(r.out.find("floe run: 3 cases: 2 ran, 1 refused, 0 failed"), std::string::npos)
        << r.out;
    // Validation first: a problem breaking a rule is never reported as an input's shape.
    if (b.kind == "problem checked first") {
      EXPECT_NE(r.out.find("(invalid problem)"), std::string::npos) << r.out;
      EXPECT_EQ(r.out.find(".npy: shape"), std::string::npos) << r.out;
    }
  }
}

// The other commands: bad options are messages and exit codes, not aborts.
TEST_F(CliTest, NoOptionAbortsExplainOrDemo) {
  const std::string c = good_case("explain", small());
  for (const char* arch : {"sm_99999999999", "99999999999999999999999", "sm_", "sm_-80"}) {
    const Ran r = floe(std::string("explain --arch ") + arch + " " + c);
    expect_no_abort(r, arch);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("must look like sm_80"), std::string::npos) << r.out;
  }
  EXPECT_EQ(floe("explain --arch sm_86 " + c).code, 0);
  const Ran unknown = floe("explain --arch sm_9999 " + c);  // well formed, served by none
  EXPECT_EQ(unknown.code, 1) << unknown.out;
  EXPECT_NE(unknown.out.find("no engine serves"), std::string::npos) << unknown.out;
  struct Bad {
    std::string args, needle;
  };
  const std::vector<Bad> demos = {
      {"--s -5", "--s -5: must be positive"},
      {"--s 0", "--s 0: must be positive"},
      {"--d -1", "--d -1: must be positive"},
      {"--b -3", "--b -3: must be positive"},
      {"--h-q 3 --h-kv 2", "h_kv"},
      {"--h-kv 0", "--h-kv 0: must be positive"},
      {"--b 1000 --s 1000000", "memory"},
      {"--b 2000000000 --s 2000000000", "element count overflows 64 bits"},
      {"--b 1000000 --h-q 1000000 --h-kv 1000000 --s 1000000 --d 1000000", ""},
      {"--s 99999999999999999999", ""},  // past int64: CLI11's own message
  };
  for (const Bad& d : demos) {
    const Ran r = floe("demo --device cpu " + d.args);
    expect_no_abort(r, d.args);
    EXPECT_NE(r.out.find(d.needle), std::string::npos) << d.args << "\n" << r.out;
    EXPECT_EQ(r.out.find("forward: engine"), std::string::npos) << d.args << "\n" << r.out;
  }
}

// Outputs are all or nothing (item 7): a run that fails while writing leaves no out/ at all,
// neither the earlier run's outputs nor a half-new set. The failure is made by a file-size
// limit (SIGXFSZ ignored): the small dk.npy is written, the large dq.npy is not.
TEST_F(CliTest, OutputsAreAllOrNothing) {
  const Problem p = Problem::backward({1, 2, 1, 300, 2, 8, 8}, DType::bf16);
  const std::string c = good_case("atomic", p);
  ASSERT_EQ(floe("run --device cpu " + c).code, 0);
  ASSERT_TRUE(fs::exists(c + "/out/dq.npy"));
  fs::create_directories(c + "/.out.partial");
  std::ofstream(c + "/.out.partial/dk.npy") << "left by an interrupted run";
  const std::string cmd =
      "ulimit -f 8; trap '' XFSZ; exec " + std::string(kCli) + " run --device cpu " + c + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  const int status = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 1) << out;
  EXPECT_NE(out.find("dq.npy"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(c + "/out")) << "out/ holds outputs that are not this run's\n" << out;
  EXPECT_FALSE(fs::exists(c + "/.out.partial")) << out;
  // Unlimited again: one whole, fresh set, nothing else.
  ASSERT_EQ(floe("run --device cpu " + c).code, 0);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(c + "/out")) files += e.is_regular_file();
  EXPECT_EQ(files, 3u);
  EXPECT_FALSE(fs::exists(c + "/.out.partial"));
}

// An earlier out/ that cannot be removed is said so, before the case runs (it used to stay,
// silently, beside a failure to write). Run as an unprivileged user: root removes anything.
TEST_F(CliTest, AnEarlierOutputThatCannotBeRemovedIsNamed) {
  std::string prefix;
  if (geteuid() == 0) {
    if (std::system("command -v setpriv >/dev/null 2>&1") != 0) GTEST_SKIP() << "root, no setpriv";
    prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  const std::string c = good_case("stuck", small());
  ASSERT_EQ(floe("run --device cpu " + c).code, 0);
  fs::permissions(c + "/out", fs::perms::owner_write, fs::perm_options::remove);
  const std::string cmd = prefix + kCli + " run --device cpu " + c + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  const int status = pclose(pipe);
  fs::permissions(c + "/out", fs::perms::owner_write, fs::perm_options::add);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 1) << out;
  EXPECT_NE(out.find("out: cannot remove"), std::string::npos) << out;
  EXPECT_NE(out.find("the outputs of an earlier run are still there"), std::string::npos) << out;
  EXPECT_NE(out.find("1 refused"), std::string::npos) << out;
}

TEST_F(CliTest, RunHelpPointsAtTheCaseFormat) {
  const Ran r = floe("run --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("docs/design.md"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("problem.json"), std::string::npos) << r.out;
}

// A ragged, paged case (DESIGN 4's keys) runs on the CPU; explain routes it to sm80's serving
// kernels (or generic, where the kernel set lacks the tile) and names the option sm90 declines
// (its forward serves ragged sides, not paged K/V).
TEST_F(CliTest, RaggedPagedCaseRunsAndExplainsTheDeclines) {
  const Problem p = Problem::forward({2, 2, 1, 4, 10, 8, 8}, DType::bf16)
                        .set_ragged_q(5)
                        .set_paged_kv(4, 6)
                        .set_causal(MaskAlign::bottom_right)
                        .set_stats();
  ArrayMap in;
  for (const std::string& n : input_names(p)) {
    const TensorDesc& d = *p.tensor(tensor_of(n));
    HostArray a;
    a.shape.assign(d.dims.begin(), d.dims.begin() + d.rank);
    a.data.assign(static_cast<size_t>(a.numel()), 0.f);
    for (size_t i = 0; i < a.data.size(); ++i)
      a.data[i] = 0.01f * static_cast<float>(i % 31) - 0.1f;
    in[n] = a;
  }
  in["offsets_q"].data = {0, 1, 4};
  in["seq_len_kv"].data = {10, 5};
  in["block_table"].data = {5, 0, 3, 2, 1, -1};
  const std::string c = (dir_ / "ragged_paged").string();
  ASSERT_TRUE(write_case(c, p, in).ok());
  const Ran r = floe("run --device cpu " + c);
  ASSERT_EQ(r.code, 0) << r.out;
  Result<HostArray> o = read_npy(c + "/out/o.npy");
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->shape, (std::vector<int64_t>{5, 2, 8}));
  Result<HostArray> stats = read_npy(c + "/out/stats.npy");
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->shape, (std::vector<int64_t>{5, 2}));
  // Tokens 0..3 are the two slots' rows; token 4 lies past the last slot: never written, it
  // keeps the poison (NaN).
  for (size_t i = 0; i < stats->data.size(); ++i) {
    EXPECT_EQ(std::isfinite(stats->data[i]), i < 8) << "element " << i << "\n" << r.out;
  }
  const Ran e = floe("explain --arch sm_90 " + c);
  ASSERT_EQ(e.code, 0) << e.out;
  // sm90 has no tile for its head dim; sm80 serves it natively where the kernel set holds its
  // tile (d64 here), and in the ci set, which does not, generic takes it (or a decode engine
  // ranked ahead, for this short query side).
  const std::string chosen = first_line(e.out);
  EXPECT_TRUE(chosen == "engine: sm80" || chosen == "engine: generic" || chosen == "engine: decode")
      << e.out;
  EXPECT_NE(e.out.find("  sm90: declined: head dims d_qk = 8, d_v = 8: "), std::string::npos)
      << e.out;
  if (chosen == "engine: generic") {
    EXPECT_NE(e.out.find("  sm80: declined: kernel not built in the ci kernel set (serving tile "
                         "d64, bf16, plain)"),
              std::string::npos)
        << e.out;
  }
}

}  // namespace
}  // namespace floe::tool
