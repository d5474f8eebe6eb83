// Ragged and paged cases (DESIGN 4): exactly the keys ragged_q, ragged_kv and paged_kv with
// their offsets and block tables in problem.json; every refusal names the key; a problem
// written with write_case reads back the same and runs to the same outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <random>
#include <string>

#include "case_folder.h"
#include "floe/floe.h"

namespace floe::tool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path temp_dir() {
  const fs::path dir = fs::path(FLOE_BINARY_DIR) / "test_tmp" / "serving_case" /
                       ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// DESIGN 4's example, completed with the keys every problem gives.
json design_example() {
  return json::parse(R"({
    "op": "fwd", "dtype": "bf16", "h_q": 4, "h_kv": 2, "d_qk": 16, "d_v": 8,
    "b": 3, "s_q": 300, "s_kv": 48,
    "ragged_q":  {"total": 700, "offsets": [0, 100, 400, 650]},
    "paged_kv":  {"page_size": 16, "num_pages": 64, "block_table": [[3, 7, 1], [0, 2, 9], [5, 4, 8]]},
    "seq_len_q": [100, 290, 250], "seq_len_kv": [40, 33, 48]
  })");
}

TEST(ServingJson, TheDesignExampleParses) {
  Result<Problem> r = problem_from_json(design_example());
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Problem& p = *r;
  ASSERT_TRUE(p.ragged_q().has_value());
  EXPECT_EQ(p.ragged_q()->total, 700);
  ASSERT_TRUE(p.paged_kv().has_value());
  EXPECT_EQ(p.paged_kv()->page_size, 16);
  EXPECT_EQ(p.paged_kv()->num_pages, 64);
  EXPECT_EQ(p.paged_kv()->max_pages, 3);
  EXPECT_FALSE(p.ragged_kv().has_value());
  const TensorDesc& q = *p.tensor(TensorId::q);
  EXPECT_EQ(q.rank, 3);
  EXPECT_EQ(q.dims[0], 700);
  EXPECT_EQ(q.dims[1], 4);
  EXPECT_EQ(q.dims[2], 16);
  EXPECT_EQ(p.tensor(TensorId::k)->dims, (std::array<int64_t, 4>{64, 16, 2, 16}));
  EXPECT_EQ(p.tensor(TensorId::v)->dims, (std::array<int64_t, 4>{64, 16, 2, 8}));
  EXPECT_EQ(p.tensor(TensorId::block_table)->dims[0], 3);
  EXPECT_EQ(p.tensor(TensorId::block_table)->dims[1], 3);
  EXPECT_EQ(p.tensor(TensorId::offsets_q)->dims[0], 4);
  EXPECT_TRUE(p.has(TensorId::seq_len_q));
  EXPECT_TRUE(p.has(TensorId::seq_len_kv));
  EXPECT_EQ(input_names(p), (std::vector<std::string>{"q", "k", "v", "seq_len_q", "seq_len_kv",
                                                      "offsets_q", "block_table"}));
  Result<Plan> plan = Plan::build(p, Target::cpu(1));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->engine(), "reference");
}

TEST(ServingJson, RaggedKeySideAndStatsStrides) {
  json j = design_example();
  j.erase("paged_kv");
  j["ragged_kv"] = {{"total", 120}, {"offsets", {0, 40, 73, 120}}};
  j["stats"] = true;
  j["strides"] = {{"stats", {1, 700}}, {"k", {32, 16, 1}}};
  Result<Problem> r = problem_from_json(j);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->tensor(TensorId::k)->rank, 3);
  EXPECT_EQ(r->tensor(TensorId::k)->dims[0], 120);
  EXPECT_EQ(r->tensor(TensorId::stats)->strides[0], 1);
  EXPECT_EQ(r->tensor(TensorId::stats)->strides[1], 700);
  EXPECT_TRUE(Plan::build(*r, Target::cpu(1)).ok());
}

TEST(ServingJson, EveryRefusalNamesTheKey) {
  struct Bad {
    const char* what;
    std::function<void(json&)> edit;
    const char* key;
    const char* rule;
  };
  const Bad cases[] = {
      {"ragged_q type", [](json& j) { j["ragged_q"] = 700; }, "ragged_q", "object"},
      {"ragged_q unknown key", [](json& j) { j["ragged_q"]["max"] = 3; }, "ragged_q.max",
       "unknown"},
      {"ragged_q total missing", [](json& j) { j["ragged_q"].erase("total"); }, "ragged_q.total",
       "missing"},
      {"ragged_q total zero", [](json& j) { j["ragged_q"]["total"] = 0; }, "ragged_q.total",
       "positive"},
      {"ragged_q offsets missing", [](json& j) { j["ragged_q"].erase("offsets"); },
       "ragged_q.offsets", "missing"},
      {"ragged_q offsets count",
       [](json& j) {
         j["ragged_q"]["offsets"] = {0, 100, 400};
       },
       "ragged_q.offsets", "b + 1 (4)"},
      {"ragged_q offsets past total",
       [](json& j) {
         j["ragged_q"]["offsets"] = {0, 100, 400, 701};
       },
       "ragged_q.offsets[3]", "[0, total = 700]"},
      {"ragged_q offsets decrease",
       [](json& j) {
         j["ragged_q"]["offsets"] = {0, 400, 100, 650};
       },
       "ragged_q.offsets[2]", "never decrease"},
      {"ragged_q offsets element",
       [](json& j) {
         j["ragged_q"]["offsets"] = {0, 1.5, 400, 650};
       },
       "ragged_q.offsets[1]", "integer"},
      {"ragged_kv with paged_kv",
       [](json& j) {
         j["ragged_kv"] = {{"total", 10}, {"offsets", {0, 1, 2, 3}}};
       },
       "paged_kv", "excludes ragged_kv"},
      {"paged_kv backward", [](json& j) { j["op"] = "bwd"; }, "paged_kv", "forward only"},
      {"paged_kv type", [](json& j) { j["paged_kv"] = 16; }, "paged_kv", "object"},
      {"paged_kv unknown key", [](json& j) { j["paged_kv"]["layout"] = "HND"; }, "paged_kv.layout",
       "unknown"},
      {"paged_kv page size zero", [](json& j) { j["paged_kv"]["page_size"] = 0; },
       "paged_kv.page_size", "positive"},
      {"paged_kv num_pages missing", [](json& j) { j["paged_kv"].erase("num_pages"); },
       "paged_kv.num_pages", "missing"},
      {"paged_kv table rows", [](json& j) { j["paged_kv"]["block_table"].erase(2); },
       "paged_kv.block_table", "b (3) rows"},
      {"paged_kv ragged table",
       [](json& j) {
         j["paged_kv"]["block_table"][1] = {0, 2};
       },
       "paged_kv.block_table[1]", "max_pages"},
      {"paged_kv page out of range", [](json& j) { j["paged_kv"]["block_table"][1][2] = 64; },
       "paged_kv.block_table[1][2]", "[0, num_pages = 64)"},
      {"paged_kv without lengths", [](json& j) { j.erase("seq_len_kv"); }, "seq_len_kv", "missing"},
  };
  for (const Bad& c : cases) {
    json j = design_example();
    c.edit(j);
    Result<Problem> r = problem_from_json(j);
    ASSERT_FALSE(r.ok()) << c.what << " was accepted";
    const std::string& msg = r.status().message();
    EXPECT_NE(msg.find(std::string("key '") + c.key + "'"), std::string::npos)
        << c.what << ": " << msg;
    EXPECT_NE(msg.find(c.rule), std::string::npos) << c.what << ": " << msg;
  }
  // A page past the batch's need may hold anything (-1 is usual).
  json j = design_example();
  j["paged_kv"]["block_table"][1][2] = -1;  // batch 1 has 33 keys: pages 0..2 needed
  EXPECT_FALSE(problem_from_json(j).ok());
  j["seq_len_kv"] = {40, 32, 48};  // now 2 pages
  EXPECT_TRUE(problem_from_json(j).ok());
}

ArrayMap random_inputs(const Problem& p, std::mt19937& rng) {
  ArrayMap in;
  std::normal_distribution<float> dist;
  for (const std::string& n : input_names(p)) {
    const TensorDesc& d = *p.tensor(tensor_of(n));
    HostArray a;
    a.shape.assign(d.dims.begin(), d.dims.begin() + d.rank);
    a.data.resize(static_cast<size_t>(a.numel()));
    for (float& x : a.data) x = dist(rng);
    in[n] = a;
  }
  return in;
}

HostArray ints(std::vector<int64_t> shape, std::vector<float> values) {
  HostArray a;
  a.shape = std::move(shape);
  a.data = std::move(values);
  return a;
}

// Written, read back, run: the same problem, the same inputs, the same outputs as running the
// in-memory case; and the json holds the integer arrays where DESIGN 4 puts them.
TEST(ServingCase, WriteReadRunRoundTrips) {
  const Shape s{3, 4, 2, 6, 9, 16, 8};
  std::vector<std::pair<Problem, ArrayMap>> cases;
  std::mt19937 rng(3);
  {
    Problem p = Problem::backward(s, DType::bf16)
                    .set_ragged_q(20)
                    .set_ragged_kv(25)
                    .set_seq_len_q()
                    .set_causal(MaskAlign::bottom_right)
                    .set_strides(TensorId::stats, {1, 20});
    ArrayMap in = random_inputs(p, rng);
    in["offsets_q"] = ints({4}, {0, 6, 6, 17});
    in["offsets_kv"] = ints({4}, {0, 9, 12, 21});
    in["seq_len_q"] = ints({3}, {5, 0, 6});
    cases.emplace_back(p, in);
  }
  {
    Problem p = Problem::forward(s, DType::f16).set_ragged_q(20).set_paged_kv(4, 10).set_stats();
    ArrayMap in = random_inputs(p, rng);
    in["offsets_q"] = ints({4}, {0, 1, 2, 3});  // decode: one query per batch
    in["block_table"] = ints({3, 3}, {9, 0, 4, 2, -1, -1, 7, 1, 3});
    in["seq_len_kv"] = ints({3}, {9, 3, 8});
    cases.emplace_back(p, in);
  }
  int index = 0;
  for (const auto& [p, in] : cases) {
    SCOPED_TRACE("case " + std::to_string(index));
    const fs::path dir = temp_dir() / ("case" + std::to_string(index++));
    ASSERT_TRUE(write_case(dir.string(), p, in).ok());
    for (const char* n : {"offsets_q", "offsets_kv", "block_table", "seq_len_q", "seq_len_kv"}) {
      EXPECT_FALSE(fs::exists(dir / (std::string(n) + ".npy"))) << n;
    }
    Result<Case> c = read_case(dir.string());
    ASSERT_TRUE(c.ok()) << c.status().message();
    if (p.ragged_q()) {
      EXPECT_EQ(c->json["ragged_q"]["offsets"],
                json(std::vector<int64_t>(in.at("offsets_q").data.begin(),
                                          in.at("offsets_q").data.end())));
    }
    if (p.paged_kv()) {
      EXPECT_EQ(c->json["paged_kv"]["block_table"],
                json::parse("[[9, 0, 4], [2, -1, -1], [7, 1, 3]]"));
      EXPECT_EQ(c->json["paged_kv"]["page_size"], 4);
    }
    for (int i = 0; i < kTensorCount; ++i) {
      const auto id = static_cast<TensorId>(i);
      ASSERT_EQ(p.has(id), c->problem.has(id)) << to_string(id);
      if (!p.has(id)) continue;
      EXPECT_EQ(p.tensor(id)->dims, c->problem.tensor(id)->dims) << to_string(id);
      EXPECT_EQ(p.tensor(id)->strides, c->problem.tensor(id)->strides) << to_string(id);
      EXPECT_EQ(p.tensor(id)->dtype, c->problem.tensor(id)->dtype) << to_string(id);
    }
    ASSERT_EQ(c->inputs.size(), in.size());
    for (const auto& [name, a] : in) {
      EXPECT_EQ(c->inputs.at(name).shape, a.shape) << name;
      EXPECT_EQ(c->inputs.at(name).data, a.data) << name;
    }
    Case direct;
    direct.problem = p;
    direct.inputs = in;
    Result<RunResult> from_disk = run_case(*c, "auto", Memory::host);
    Result<RunResult> in_memory = run_case(direct, "auto", Memory::host);
    ASSERT_TRUE(from_disk.ok()) << from_disk.status().message();
    ASSERT_TRUE(in_memory.ok()) << in_memory.status().message();
    for (const auto& [name, a] : in_memory->outputs) {
      const HostArray& b = from_disk->outputs.at(name);
      ASSERT_EQ(a.shape, b.shape) << name;
      for (size_t e = 0; e < a.data.size(); ++e) {
        const bool same =
            (std::isnan(a.data[e]) && std::isnan(b.data[e])) || a.data[e] == b.data[e];
        ASSERT_TRUE(same) << name << " element " << e;
      }
    }
  }
}

// i64 offsets have no key in problem.json (DESIGN 4 gives none): such a problem is refused by
// problem_to_json rather than written as another problem.
TEST(ServingCase, WhatTheFormatCannotSayIsRefused) {
  const Problem p =
      Problem::forward({2, 2, 1, 4, 4, 8, 8}, DType::bf16).set_ragged_q(6, DType::i64);
  ArrayMap in;
  in["offsets_q"] = ints({3}, {0, 2, 6});
  Result<json> j = problem_to_json(p, in);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("offsets_q"), std::string::npos) << j.status().message();
  // And the integer arrays must be given.
  const Problem p32 = Problem::forward({2, 2, 1, 4, 4, 8, 8}, DType::bf16).set_ragged_q(6);
  Result<json> missing = problem_to_json(p32, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("offsets_q"), std::string::npos);
}

// A .npy for an integer array that lives in problem.json is refused, naming where it belongs.
TEST(ServingCase, OffsetsAsNpyAreRefused) {
  const fs::path dir = temp_dir() / "case";
  const Problem p = Problem::forward({2, 2, 1, 4, 4, 8, 8}, DType::bf16).set_ragged_q(6);
  std::mt19937 rng(1);
  ArrayMap in = random_inputs(p, rng);
  in["offsets_q"] = ints({3}, {0, 2, 6});
  ASSERT_TRUE(write_case(dir.string(), p, in).ok());
  ASSERT_TRUE(read_case(dir.string()).ok());
  ASSERT_TRUE(write_npy((dir / "offsets_q.npy").string(), in["offsets_q"]).ok());
  Result<Case> c = read_case(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("ragged_q"), std::string::npos) << c.status().message();
}

}  // namespace
}  // namespace floe::tool
