// Case folders and the buffers behind `floe run`: problem.json <-> Problem (every key, every
// refusal naming the key), reading and writing case folders, and TensorBuffers on the host
// (gaps poisoned, canaries and gaps checked, outputs poisoned, zero strides).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "case_folder.h"
#include "common/dtype_convert.h"
#include "floe/floe.h"

namespace floe::tool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json base_json(const char* op = "fwd") {
  return json{{"op", op}, {"dtype", "bf16"}, {"b", 2},    {"h_q", 4}, {"h_kv", 2},
              {"s_q", 5}, {"s_kv", 7},       {"d_qk", 8}, {"d_v", 6}};
}

fs::path temp_dir() {
  const fs::path dir = fs::path(FLOE_BINARY_DIR) / "test_tmp" / "case_folder" /
                       ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// ---------------------------------------------------------------- problem.json -> Problem

TEST(ProblemJson, TheDesignExampleParses) {
  const json j = json::parse(R"({
    "op": "fwd", "dtype": "bf16",
    "b": 2, "h_q": 8, "h_kv": 2, "s_q": 100, "s_kv": 300, "d_qk": 128, "d_v": 64,
    "strides": {"q": [102400, 128, 1024, 1], "stats": [800, 1, 8]},
    "scale": 0.088, "softcap": 30.0,
    "mask": {"align": "bottom_right", "left": 64, "right": 0},
    "seq_len_q": [100, 37], "seq_len_kv": [300, 5],
    "bias": [1, 8], "sink": true, "stats": true, "deterministic": false
  })");
  Result<Problem> r = problem_from_json(j);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Problem& p = *r;
  EXPECT_EQ(p.direction(), Direction::forward);
  EXPECT_EQ(p.dtype(), DType::bf16);
  const TensorDesc& q = *p.tensor(TensorId::q);
  EXPECT_EQ(q.dims, (std::array<int64_t, 4>{2, 8, 100, 128}));
  EXPECT_EQ(q.strides, (std::array<int64_t, 4>{102400, 128, 1024, 1}));
  EXPECT_EQ(p.tensor(TensorId::stats)->strides[1], 1);
  EXPECT_EQ(p.tensor(TensorId::k)->dims, (std::array<int64_t, 4>{2, 2, 300, 128}));
  EXPECT_EQ(p.tensor(TensorId::v)->dims[3], 64);
  EXPECT_EQ(p.tensor(TensorId::bias)->dims, (std::array<int64_t, 4>{1, 8, 100, 300}));
  EXPECT_TRUE(p.has(TensorId::sink));
  EXPECT_TRUE(p.has(TensorId::seq_len_q));
  EXPECT_TRUE(p.has(TensorId::seq_len_kv));
  EXPECT_FALSE(p.has(TensorId::dq));
  EXPECT_DOUBLE_EQ(*p.scale(), 0.088);
  EXPECT_DOUBLE_EQ(*p.softcap(), 30.0);
  EXPECT_EQ(p.mask().align, MaskAlign::bottom_right);
  EXPECT_EQ(p.mask().left, 64);
  EXPECT_EQ(p.mask().right, 0);
  EXPECT_FALSE(p.deterministic());
  EXPECT_TRUE(Plan::build(p, Target::cpu(1)).ok());
}

TEST(ProblemJson, MinimalProblemIsPackedAndPlain) {
  Result<Problem> r = problem_from_json(base_json());
  ASSERT_TRUE(r.ok()) << r.status().message();
  const TensorDesc& q = *r->tensor(TensorId::q);
  EXPECT_EQ(q.strides, (std::array<int64_t, 4>{4 * 5 * 8, 5 * 8, 8, 1}));
  EXPECT_FALSE(r->has(TensorId::stats));
  EXPECT_FALSE(r->has(TensorId::bias));
  EXPECT_FALSE(r->mask().is_band());
  EXPECT_FALSE(r->scale().has_value());
  EXPECT_FALSE(r->softcap().has_value());
}

TEST(ProblemJson, NullMeansAbsent) {
  json j = base_json();
  for (const char* k : {"strides", "scale", "softcap", "mask", "seq_len_q", "seq_len_kv", "bias",
                        "sink", "stats", "deterministic"}) {
    j[k] = nullptr;
  }
  j["strides"] = json{{"q", nullptr}};
  j["strides"] = nullptr;
  Result<Problem> r = problem_from_json(j);
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (TensorId id : {TensorId::stats, TensorId::bias, TensorId::sink, TensorId::seq_len_q}) {
    EXPECT_FALSE(r->has(id)) << to_string(id);
  }
  json s = base_json();
  s["strides"] = json{{"q", nullptr}, {"k", {80, 40, 8, 1}}};
  s["mask"] = json{{"align", nullptr}, {"left", nullptr}, {"right", 0}};
  Result<Problem> r2 = problem_from_json(s);
  ASSERT_TRUE(r2.ok()) << r2.status().message();
  EXPECT_EQ(r2->mask().align, MaskAlign::top_left);
  EXPECT_FALSE(r2->mask().left.has_value());
  EXPECT_EQ(r2->mask().right, 0);
}

TEST(ProblemJson, BackwardDeclaresItsGradients) {
  json j = base_json("bwd");
  j["bias"] = {2, 1};
  j["sink"] = true;
  j["stats"] = true;  // harmless: the backward always reads stats
  j["strides"] = json{{"dq", {160, 8, 32, 1}}, {"dbias", {35, 35, 7, 1}}, {"do", {120, 30, 6, 1}}};
  Result<Problem> r = problem_from_json(j);
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (TensorId id : {TensorId::d_o, TensorId::stats, TensorId::dq, TensorId::dk, TensorId::dv,
                      TensorId::dbias, TensorId::dsink}) {
    EXPECT_TRUE(r->has(id)) << to_string(id);
  }
  EXPECT_EQ(r->tensor(TensorId::dq)->strides, (std::array<int64_t, 4>{160, 8, 32, 1}));
  EXPECT_EQ(r->tensor(TensorId::dbias)->dims, (std::array<int64_t, 4>{2, 1, 5, 7}));
  EXPECT_EQ(input_names(*r),
            (std::vector<std::string>{"q", "k", "v", "o", "do", "stats", "bias", "sink"}));
  EXPECT_EQ(output_names(*r), (std::vector<std::string>{"dq", "dk", "dv", "dbias", "dsink"}));
}

TEST(ProblemJson, ValuesAreLeftToValidation) {
  // Structure is checked here; the rules of DESIGN §2 are Plan::build's, with its messages.
  json j = base_json();
  j["h_kv"] = 3;  // h_q % h_kv != 0
  Result<Problem> r = problem_from_json(j);
  ASSERT_TRUE(r.ok()) << r.status().message();
  Result<Plan> plan = Plan::build(*r, Target::cpu(1));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Code::invalid_problem);
  EXPECT_NE(plan.status().message().find("h_kv"), std::string::npos);
}

struct BadJson {
  const char* what;
  std::function<void(json&)> edit;
  const char* key;  // the message must say key 'KEY'
  const char* rule = "";
};

TEST(ProblemJson, EveryRefusalNamesTheKey) {
  const std::vector<BadJson> cases = {
      {"unknown key", [](json& j) { j["causal"] = true; }, "causal", "unknown"},
      {"op missing", [](json& j) { j.erase("op"); }, "op", "missing"},
      {"op null", [](json& j) { j["op"] = nullptr; }, "op", "missing"},
      {"op value", [](json& j) { j["op"] = "sideways"; }, "op", "fwd or bwd"},
      {"op type", [](json& j) { j["op"] = 1; }, "op", "fwd or bwd"},
      {"dtype missing", [](json& j) { j.erase("dtype"); }, "dtype", "missing"},
      {"dtype value", [](json& j) { j["dtype"] = "f32"; }, "dtype", "f16 or bf16"},
      {"b missing", [](json& j) { j.erase("b"); }, "b", "missing"},
      {"s_kv float", [](json& j) { j["s_kv"] = 2.5; }, "s_kv", "integer"},
      {"d_v string", [](json& j) { j["d_v"] = "64"; }, "d_v", "integer"},
      {"h_q bool", [](json& j) { j["h_q"] = true; }, "h_q", "integer"},
      {"strides type", [](json& j) { j["strides"] = json::array({1}); }, "strides", "object"},
      {"strides name",
       [](json& j) {
         j["strides"] = json{{"sink", {1}}};
       },
       "strides.sink", "unknown tensor"},
      {"strides array",
       [](json& j) {
         j["strides"] = json{{"q", 5}};
       },
       "strides.q", "array"},
      {"strides element",
       [](json& j) {
         j["strides"] = json{{"q", {160, 40, "8", 1}}};
       },
       "strides.q[2]", "integer"},
      {"strides rank",
       [](json& j) {
         j["strides"] = json{{"k", {1, 2, 3}}};
       },
       "strides.k", "rank 4"},
      {"strides undeclared stats",
       [](json& j) {
         j["strides"] = json{{"stats", {20, 5, 1}}};
       },
       "strides.stats", "not declared"},
      {"strides undeclared dq",
       [](json& j) {
         j["strides"] = json{{"dq", {160, 40, 8, 1}}};
       },
       "strides.dq", "not declared"},
      {"strides undeclared bias",
       [](json& j) {
         j["strides"] = json{{"bias", {1, 1, 1, 1}}};
       },
       "strides.bias", "not declared"},
      {"scale type", [](json& j) { j["scale"] = "0.1"; }, "scale", "number"},
      {"softcap type", [](json& j) { j["softcap"] = true; }, "softcap", "number"},
      {"mask type", [](json& j) { j["mask"] = "causal"; }, "mask", "object"},
      {"mask key",
       [](json& j) {
         j["mask"] = json{{"window", 3}};
       },
       "mask.window", "unknown"},
      {"mask align value",
       [](json& j) {
         j["mask"] = json{{"align", "diagonal"}};
       },
       "mask.align", "top_left or bottom_right"},
      {"mask align type",
       [](json& j) {
         j["mask"] = json{{"align", 1}};
       },
       "mask.align", "string"},
      {"mask left type",
       [](json& j) {
         j["mask"] = json{{"left", 1.5}};
       },
       "mask.left", "integer"},
      {"mask right type",
       [](json& j) {
         j["mask"] = json{{"right", "0"}};
       },
       "mask.right", "integer"},
      {"seq_len_q type", [](json& j) { j["seq_len_q"] = 5; }, "seq_len_q", "array"},
      {"seq_len_q count",
       [](json& j) {
         j["seq_len_q"] = {5, 5, 5};
       },
       "seq_len_q", "must have b (2)"},
      {"seq_len_q element",
       [](json& j) {
         j["seq_len_q"] = {5, 2.5};
       },
       "seq_len_q[1]", "integer"},
      {"seq_len_q too long",
       [](json& j) {
         j["seq_len_q"] = {6, 0};
       },
       "seq_len_q[0]", "[0, s_q = 5]"},
      {"seq_len_q negative",
       [](json& j) {
         j["seq_len_q"] = {1, -1};
       },
       "seq_len_q[1]", "[0, s_q = 5]"},
      {"seq_len_kv too long",
       [](json& j) {
         j["seq_len_kv"] = {7, 8};
       },
       "seq_len_kv[1]", "[0, s_kv = 7]"},
      {"bias type", [](json& j) { j["bias"] = true; }, "bias", "array"},
      {"bias count", [](json& j) { j["bias"] = {1}; }, "bias", "[b_dim, h_dim]"},
      {"bias element",
       [](json& j) {
         j["bias"] = {1, 1.5};
       },
       "bias[1]", "integer"},
      {"sink type", [](json& j) { j["sink"] = 1; }, "sink", "true or false"},
      {"stats type", [](json& j) { j["stats"] = "yes"; }, "stats", "true or false"},
      {"stats false in backward",
       [](json& j) {
         j["op"] = "bwd";
         j["stats"] = false;
       },
       "stats", "always reads stats"},
      {"deterministic type", [](json& j) { j["deterministic"] = "no"; }, "deterministic",
       "true or false"},
  };
  for (const BadJson& c : cases) {
    json j = base_json();
    c.edit(j);
    Result<Problem> r = problem_from_json(j);
    ASSERT_FALSE(r.ok()) << c.what << " was accepted";
    const std::string& msg = r.status().message();
    EXPECT_NE(msg.find(std::string("key '") + c.key + "'"), std::string::npos)
        << c.what << ": " << msg;
    EXPECT_NE(msg.find(c.rule), std::string::npos) << c.what << ": " << msg;
  }
  Result<Problem> not_object = problem_from_json(json::array({1, 2}));
  ASSERT_FALSE(not_object.ok());
  EXPECT_NE(not_object.status().message().find("object"), std::string::npos);
}

// ---------------------------------------------------------------- Problem -> problem.json

TEST(ProblemJson, ToJsonRoundTrips) {
  const Shape shape{2, 4, 2, 5, 7, 8, 6};
  HostArray lens;
  lens.shape = {2};
  lens.data = {5, 0};
  ArrayMap inputs{{"seq_len_q", lens}, {"seq_len_kv", lens}};
  std::vector<Problem> problems = {
      Problem::forward(shape, DType::f16),
      Problem::forward(shape, DType::bf16)
          .set_stats()
          .set_bias(1, 4)
          .set_sink()
          .set_scale(0.25)
          .set_softcap(20)
          .set_window(3, std::nullopt, MaskAlign::bottom_right)
          .set_deterministic()
          .set_strides(TensorId::q, {200, 8, 40, 1})
          .set_strides(TensorId::stats, {20, 1, 4}),
      Problem::backward(shape, DType::bf16)
          .set_causal()
          .set_bias(2, 1)
          .set_seq_len_q()
          .set_seq_len_kv()
          .set_strides(TensorId::dk, {2 * 7 * 16, 16, 2 * 16, 1}),
  };
  for (const Problem& p : problems) {
    Result<json> j = problem_to_json(p, inputs);
    ASSERT_TRUE(j.ok()) << j.status().message();
    Result<Problem> back = problem_from_json(*j);
    ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << j->dump();
    EXPECT_EQ(back->direction(), p.direction());
    EXPECT_EQ(back->scale(), p.scale());
    EXPECT_EQ(back->softcap(), p.softcap());
    EXPECT_EQ(back->mask().left, p.mask().left);
    EXPECT_EQ(back->mask().right, p.mask().right);
    EXPECT_EQ(back->mask().align, p.mask().align);
    EXPECT_EQ(back->deterministic(), p.deterministic());
    for (int i = 0; i < kTensorCount; ++i) {
      const auto id = static_cast<TensorId>(i);
      ASSERT_EQ(back->has(id), p.has(id)) << to_string(id);
      if (!p.has(id)) continue;
      EXPECT_EQ(back->tensor(id)->dims, p.tensor(id)->dims) << to_string(id);
      EXPECT_EQ(back->tensor(id)->strides, p.tensor(id)->strides) << to_string(id);
    }
    if (p.has(TensorId::seq_len_q)) EXPECT_EQ((*j)["seq_len_q"], json({5, 0}));
  }
}

TEST(ProblemJson, ToJsonRefusesWhatTheFormatCannotSay) {
  const Shape shape{1, 2, 1, 4, 4, 8, 8};
  Result<json> no_grad =
      problem_to_json(Problem::backward(shape, DType::bf16).set_bias(1, 1).set_bias_grad(false));
  ASSERT_FALSE(no_grad.ok());
  EXPECT_NE(no_grad.status().message().find("tensor 'dbias'"), std::string::npos)
      << no_grad.status().message();
  Result<json> no_lens = problem_to_json(Problem::forward(shape, DType::bf16).set_seq_len_q());
  ASSERT_FALSE(no_lens.ok());
  EXPECT_NE(no_lens.status().message().find("seq_len_q"), std::string::npos);
}

// ---------------------------------------------------------------- case folders

HostArray iota(std::vector<int64_t> shape, float scale = 0.01f) {
  HostArray a;
  a.shape = std::move(shape);
  a.data.resize(static_cast<size_t>(a.numel()));
  for (size_t i = 0; i < a.data.size(); ++i) a.data[i] = scale * static_cast<float>(i % 97) - 0.4f;
  return a;
}

ArrayMap inputs_for(const Problem& p, const std::vector<float>& lens = {}) {
  ArrayMap m;
  for (const std::string& n : input_names(p)) {
    const TensorDesc& d = *p.tensor(tensor_of(n));
    if (n == "seq_len_q" || n == "seq_len_kv") {
      m[n].shape = {d.dims[0]};
      m[n].data = lens;
      continue;
    }
    m[n] = iota(std::vector<int64_t>(d.dims.begin(), d.dims.begin() + d.rank));
  }
  return m;
}

TEST(CaseFolder, WriteThenReadKeepsEverything) {
  const fs::path dir = temp_dir() / "case";
  const Problem p = Problem::backward({2, 4, 2, 5, 7, 8, 6}, DType::f16)
                        .set_sink()
                        .set_seq_len_kv()
                        .set_strides(TensorId::q, {320, 8, 64, 1});
  const ArrayMap inputs = inputs_for(p, {7, 3});
  ASSERT_TRUE(write_case(dir.string(), p, inputs).ok());
  EXPECT_FALSE(fs::exists(dir / "seq_len_kv.npy"));  // the lengths live in problem.json
  EXPECT_TRUE(fs::exists(dir / "do.npy"));
  Result<Case> c = read_case(dir.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->json["seq_len_kv"], json({7, 3}));
  EXPECT_EQ(c->problem.tensor(TensorId::q)->strides, (std::array<int64_t, 4>{320, 8, 64, 1}));
  ASSERT_EQ(c->inputs.size(), inputs.size());
  for (const auto& [name, a] : inputs) {
    EXPECT_EQ(c->inputs.at(name).shape, a.shape) << name;
    EXPECT_EQ(c->inputs.at(name).data, a.data) << name;
  }
}

TEST(CaseFolder, MissingOrMisshapedInputsNameTheFileAndTheShape) {
  const fs::path dir = temp_dir() / "case";
  const Problem p = Problem::forward({1, 2, 1, 3, 4, 8, 8}, DType::bf16).set_bias(1, 2);
  ArrayMap inputs = inputs_for(p);
  inputs.erase("bias");
  ASSERT_TRUE(write_case(dir.string(), p, inputs).ok());
  Result<Case> c = read_case(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("bias.npy: missing"), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find("(1, 2, 3, 4)"), std::string::npos) << c.status().message();

  ASSERT_TRUE(write_npy((dir / "bias.npy").string(), iota({2, 3, 4})).ok());
  c = read_case(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("bias.npy: shape (2, 3, 4), the problem needs (1, 2, 3, 4)"),
            std::string::npos)
      << c.status().message();

  std::ofstream(dir / "problem.json") << "{\"op\": \"fwd\",";
  c = read_case(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("problem.json: not valid JSON"), std::string::npos)
      << c.status().message();

  std::ofstream(dir / "problem.json") << "{\"op\": \"fwd\", \"dtype\": \"bf16\"}";
  c = read_case(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("problem.json: key 'b': missing"), std::string::npos)
      << c.status().message();

  c = read_case((dir / "nowhere").string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("no such folder"), std::string::npos);
}

// ---------------------------------------------------------------- issue 11: inputs that used to
// abort floe or pass unnoticed

// Numbers no double holds, and duplicate keys at any depth: a message naming the file and
// the key, never an exception (1e400 threw json::out_of_range, which aborted floe).
TEST(ProblemJsonText, OutOfRangeNumbersAndDuplicateKeysAreRefused) {
  const std::string shape =
      R"("dtype": "bf16", "b": 1, "h_q": 1, "h_kv": 1, "s_q": 2, "s_kv": 2, "d_qk": 8, "d_v": 8)";
  struct Bad {
    std::string text, needle;
  };
  const std::vector<Bad> bad = {
      {R"({"op": "fwd", )" + shape + R"(, "scale": 1e400})", "not valid JSON"},
      {R"({"op": "fwd", )" + shape + R"(, "scale": -1e400})", "not valid JSON"},
      {R"({"op": "fwd", )" + shape + R"(, "softcap": 1e999999})", "not valid JSON"},
      {R"({"op": "fwd", "op": "bwd", )" + shape + "}", "key 'op' appears twice"},
      {R"({"op": "fwd", )" + shape + R"(, "b": 2})", "key 'b' appears twice"},
      {R"({"op": "fwd", )" + shape + R"(, "mask": {"left": 1, "left": 2}})",
       "key 'mask.left' appears twice"},
      {R"({"op": "fwd", )" + shape + R"(, "strides": {"q": [32, 16, 8, 1], "q": null}})",
       "key 'strides.q' appears twice"},
  };
  for (const Bad& b : bad) {
    Result<json> j = parse_problem_json(b.text, "case/problem.json");
    ASSERT_FALSE(j.ok()) << b.text;
    EXPECT_NE(j.status().message().find("case/problem.json: " + b.needle), std::string::npos)
        << j.status().message();
  }
  // The same keys in different objects are not duplicates.
  Result<json> ok = parse_problem_json(
      R"({"op": "fwd", )" + shape +
          R"(, "mask": {"left": 1, "right": 1}, "strides": {"q": null, "k": null}})",
      "p");
  EXPECT_TRUE(ok.ok()) << ok.status().message();
}

// A span whose size wraps 64 bits (TensorDesc::span_bytes() wraps: a stride of INT64_MAX gave
// a small buffer that the layout then wrote far outside of, a crash).
TEST(Spans, OverflowIsRefusedNamingTheTensor) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  struct Bad {
    TensorDesc desc;
  };
  auto desc = [](std::array<int64_t, 4> dims, std::array<int64_t, 4> strides) {
    TensorDesc d;
    d.dtype = DType::bf16;
    d.rank = 4;
    d.dims = dims;
    d.strides = strides;
    return d;
  };
  const std::vector<TensorDesc> bad = {
      desc({2, 1, 2, 8}, {big, 16, 8, 1}),                 // one term overflows
      desc({2, 2, 2, 8}, {big / 2, big / 2, 8, 1}),        // the sum overflows
      desc({2, 1, 1, 1}, {big / 2 + 1, 1, 1, 1}),          // the bytes overflow
      desc({3037000500, 3037000500, 1, 1}, {1, 1, 1, 1}),  // the element count
      desc({2, 1, 1, 2}, {1, 1, 1, -big}),                 // a negative stride's term
      desc({2, 1, 1, 2}, {1, 1, 1, -big - 1}),  // INT64_MIN: its magnitude does not fit (fuzz_plan)
  };
  for (const TensorDesc& d : bad) {
    size_t bytes = 1;
    const Status st = span_bytes_checked(TensorId::k, d, &bytes);
    ASSERT_FALSE(st.ok()) << d.strides[0];
    EXPECT_EQ(st.code(), Code::invalid_problem);
    EXPECT_NE(st.message().find("tensor 'k'"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("64-bit"), std::string::npos) << st.message();
  }
  size_t bytes = 0;
  ASSERT_TRUE(span_bytes_checked(TensorId::q, desc({2, 3, 4, 8}, {96, 32, 8, 1}), &bytes).ok());
  EXPECT_EQ(bytes, 192u * 2);
  ASSERT_TRUE(span_bytes_checked(TensorId::q, desc({2, 0, 4, 8}, {big, big, 8, 1}), &bytes).ok());
  EXPECT_EQ(bytes, 0u);

  // Through the buffers and the case reader, which used to crash on it.
  const Problem p = Problem::forward({2, 1, 1, 2, 2, 8, 8}, DType::bf16)
                        .set_strides(TensorId::q, {big, 16, 8, 1});
  Result<TensorBuffers> b = TensorBuffers::create(p, Memory::host);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("tensor 'q'"), std::string::npos) << b.status().message();
  EXPECT_FALSE(check_spans(p).ok());
  Case c;
  c.problem = p;
  c.inputs = inputs_for(Problem::forward({2, 1, 1, 2, 2, 8, 8}, DType::bf16));
  EXPECT_FALSE(run_case(c, "reference", Memory::host).ok());
}

// The problem is checked before any input is read (issue 11 item 6): with b = 0 the message
// names the rule, not the shape of q.npy.
TEST(CaseFolder, TheProblemIsValidatedBeforeTheInputs) {
  const fs::path dir = temp_dir();
  const Problem good = Problem::forward({1, 2, 1, 3, 4, 8, 8}, DType::bf16);
  struct Bad {
    std::string key;
    json value;
  };
  const std::vector<Bad> bad = {{"b", 0}, {"b", -1}, {"h_kv", 3}, {"s_q", -4}, {"d_qk", 0}};
  for (const Bad& b : bad) {
    const fs::path c = dir / (b.key + "_" + b.value.dump());
    ASSERT_TRUE(write_case(c.string(), good, inputs_for(good)).ok());
    json j = *problem_to_json(good);
    j[b.key] = b.value;
    std::ofstream(c / "problem.json") << j.dump();
    Result<Case> r = read_case(c.string());
    ASSERT_FALSE(r.ok()) << b.key;
    EXPECT_EQ(r.status().code(), Code::invalid_problem) << r.status().message();
    EXPECT_EQ(r.status().message().find(".npy"), std::string::npos) << r.status().message();
  }
}

// A .npy the problem does not read is refused by name (issue 11 item 7): running without it
// would silently run another problem than the one meant.
TEST(CaseFolder, AnInputTheProblemDoesNotReadIsRefused) {
  const fs::path dir = temp_dir();
  const Problem p = Problem::forward({1, 2, 1, 3, 4, 8, 8}, DType::bf16);
  const Problem with_bias = Problem::forward({1, 2, 1, 3, 4, 8, 8}, DType::bf16).set_bias(1, 2);
  struct Bad {
    std::string file, needle;
  };
  const std::vector<Bad> bad = {
      {"bias", "declare it in problem.json with \"bias\""},
      {"sink", "declare it in problem.json with \"sink\""},
      {"seq_len_q", "given in problem.json"},
      {"o", "a forward reads q k v"},
      {"qq", "does not read an input 'qq'"},
  };
  for (const Bad& b : bad) {
    const fs::path c = dir / b.file;
    ASSERT_TRUE(write_case(c.string(), p, inputs_for(p)).ok());
    ASSERT_TRUE(write_npy((c / (b.file + ".npy")).string(), iota({2})).ok());
    Result<Case> r = read_case(c.string());
    ASSERT_FALSE(r.ok()) << b.file;
    EXPECT_NE(r.status().message().find(b.file + ".npy: the problem does not read"),
              std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find(b.needle), std::string::npos) << r.status().message();
  }
  // Declared, the same bias.npy is read.
  const fs::path c = dir / "declared";
  ASSERT_TRUE(write_case(c.string(), with_bias, inputs_for(with_bias)).ok());
  EXPECT_TRUE(read_case(c.string()).ok());
}

// Files where folders belong and folders where files belong: messages, not aborts.
TEST(CaseFolder, DirectoriesAndDevicesWhereFilesBelong) {
  const fs::path dir = temp_dir();
  const Problem p = Problem::forward({1, 2, 1, 3, 4, 8, 8}, DType::bf16);
  // problem.json is a directory.
  fs::create_directories(dir / "json_dir" / "problem.json");
  Result<Case> r = read_case((dir / "json_dir").string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("problem.json: is a directory"), std::string::npos)
      << r.status().message();
  // q.npy is a directory.
  ASSERT_TRUE(write_case((dir / "npy_dir").string(), p, inputs_for(p)).ok());
  fs::remove(dir / "npy_dir" / "q.npy");
  fs::create_directories(dir / "npy_dir" / "q.npy");
  r = read_case((dir / "npy_dir").string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("q.npy: is a directory"), std::string::npos)
      << r.status().message();
  // The case is a file.
  std::ofstream(dir / "file") << "{}";
  r = read_case((dir / "file").string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a folder"), std::string::npos) << r.status().message();
  // problem.json is endless: read up to a bound, then refused.
  if (fs::exists("/dev/zero")) {
    fs::create_directories(dir / "endless");
    fs::create_symlink("/dev/zero", dir / "endless" / "problem.json");
    r = read_case((dir / "endless").string());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("larger than"), std::string::npos) << r.status().message();
  }
}

// ---------------------------------------------------------------- TensorBuffers (host)

uint32_t bits_at(const void* base, int64_t element, DType dtype) {
  uint32_t v = 0;
  std::memcpy(&v, static_cast<const char*>(base) + element * size_of(dtype), size_of(dtype));
  return v;
}

// q [1, 2, 3, 4] in a [1, 2, 3, 8] box, heads outermost: half of every row is a gap.
Problem gappy_problem() {
  return Problem::forward({1, 2, 1, 3, 5, 4, 4}, DType::bf16)
      .set_strides(TensorId::q, {48, 24, 8, 1})
      .set_strides(TensorId::o, {1, 4, 8, 1})  // heads innermost but one: permuted order, no gap
      .set_stats();
}

TEST(Buffers, GapsArePoisonedAndValuesRounded) {
  const Problem p = gappy_problem();
  Result<TensorBuffers> b = TensorBuffers::create(p, Memory::host);
  ASSERT_TRUE(b.ok()) << b.status().message();
  const HostArray q = iota({1, 2, 3, 4}, 0.0123f);
  ASSERT_TRUE(b->upload(TensorId::q, q).ok());
  const Arguments args = b->arguments();
  for (int i = 0; i < kTensorCount; ++i) {
    if (args.ptr[i]) EXPECT_EQ(reinterpret_cast<uintptr_t>(args.ptr[i]) % 256, 0u) << i;
  }
  const void* qp = args.get(TensorId::q);
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t s = 0; s < 3; ++s) {
      for (int64_t d = 0; d < 8; ++d) {
        const int64_t e = h * 24 + s * 8 + d;
        if (e > 43) {
          EXPECT_EQ(bits_at(qp, e, DType::bf16), 0xA5A5u) << e;  // past the span: canary
        } else if (d < 4) {
          const float want = detail::round_to(DType::bf16, q.data[(h * 3 + s) * 4 + d]);
          EXPECT_EQ(detail::load_as_float(qp, e, DType::bf16), want);
        } else {
          EXPECT_EQ(bits_at(qp, e, DType::bf16), TensorBuffers::poison_bits(DType::bf16)) << e;
          EXPECT_TRUE(std::isnan(detail::load_as_float(qp, e, DType::bf16)));
        }
      }
    }
  }
  // The canary starts right after the span (last element 1*24 + 2*8 + 3 = 43).
  EXPECT_EQ(static_cast<const unsigned char*>(qp)[44 * 2], TensorBuffers::kCanaryByte);
  EXPECT_EQ(static_cast<const unsigned char*>(qp)[-1], TensorBuffers::kCanaryByte);
  Result<HostArray> back = b->download(TensorId::q);
  ASSERT_TRUE(back.ok());
  for (size_t i = 0; i < q.data.size(); ++i) {
    EXPECT_EQ(back->data[i], detail::round_to(DType::bf16, q.data[i]));
  }
  EXPECT_TRUE(b->check_guards().ok()) << b->check_guards().message();
}

TEST(Buffers, PoisonedOutputsReadAsNaNUntilWritten) {
  const Problem p = gappy_problem();
  Result<TensorBuffers> b = TensorBuffers::create(p, Memory::host);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(b->upload(TensorId::o, iota({1, 2, 3, 4})).ok());  // as a run would leave it
  ASSERT_TRUE(b->poison_outputs().ok());
  Result<HostArray> o = b->download(TensorId::o);
  ASSERT_TRUE(o.ok());
  for (float x : o->data) EXPECT_TRUE(std::isnan(x));
  Result<HostArray> stats = b->download(TensorId::stats);
  ASSERT_TRUE(stats.ok());
  for (float x : stats->data) EXPECT_TRUE(std::isnan(x));
  // A run writes every addressed element of an output: the guards stay quiet.
  void* op = b->arguments().get(TensorId::o);
  for (int64_t e = 0; e < 2 * 3 * 4; ++e) detail::store_from_float(op, e, DType::bf16, 1.5f);
  EXPECT_TRUE(b->check_guards().ok()) << b->check_guards().message();
  o = b->download(TensorId::o);
  for (float x : o->data) EXPECT_EQ(x, 1.5f);
}

TEST(Buffers, DamageIsFoundAndNamed) {
  struct Plant {
    const char* what;
    TensorId id;
    int64_t byte;  // from the tensor's base
    const char* needle;
  };
  const std::vector<Plant> plants = {
      {"before the buffer", TensorId::q, -1,
       "tensor 'q': canary damaged at byte offset -1 (before"},
      {"far before", TensorId::k, -256, "tensor 'k': canary damaged at byte offset -256"},
      {"just past the span", TensorId::q, 88,
       "tensor 'q': canary damaged at byte offset 88 (after"},
      {"into the rounding slack", TensorId::stats, 255,
       "tensor 'stats': canary damaged at byte offset 255"},
      {"last canary byte", TensorId::o, 256 + 255, "tensor 'o': canary damaged at byte offset 511"},
      {"into a gap", TensorId::q, 2 * 5,
       "tensor 'q': stride gap damaged at byte offset 10 (element 5)"},
      {"into an input", TensorId::v, 2 * 3,
       "tensor 'v': input overwritten at byte offset 6 (element 3)"},
  };
  for (const Plant& pl : plants) {
    Result<TensorBuffers> b = TensorBuffers::create(gappy_problem(), Memory::host);
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(b->check_guards().ok());
    auto* base = static_cast<unsigned char*>(b->arguments().get(pl.id));
    base[pl.byte] ^= 0x10;
    const Status st = b->check_guards();
    ASSERT_FALSE(st.ok()) << pl.what;
    EXPECT_NE(st.message().find(pl.needle), std::string::npos) << pl.what << ": " << st.message();
  }
}

TEST(Buffers, ZeroStridesNeedAgreeingValues) {
  // k broadcast over heads (stride 0), as a framework's expand() gives it.
  const Problem p =
      Problem::forward({1, 2, 2, 2, 3, 4, 4}, DType::f16).set_strides(TensorId::k, {12, 0, 4, 1});
  Result<TensorBuffers> b = TensorBuffers::create(p, Memory::host);
  ASSERT_TRUE(b.ok()) << b.status().message();
  HostArray k = iota({1, 2, 3, 4});
  for (size_t i = 0; i < 12; ++i) k.data[12 + i] = k.data[i];
  EXPECT_TRUE(b->upload(TensorId::k, k).ok());
  // Values that differ below f16's precision agree once rounded.
  k.data[12 + 5] = std::nextafter(k.data[5], 1.f);
  EXPECT_TRUE(b->upload(TensorId::k, k).ok());
  k.data[12 + 5] = k.data[5] + 0.5f;
  const Status st = b->upload(TensorId::k, k);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("tensor 'k': elements [0, 0, 1, 1] and [0, 1, 1, 1] share one"),
            std::string::npos)
      << st.message();
  // A refused upload leaves the buffer as it was.
  Result<HostArray> back = b->download(TensorId::k);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->data[5], detail::round_to(DType::f16, k.data[5]));
  EXPECT_TRUE(b->check_guards().ok());
}

TEST(Buffers, UploadRefusalsNameTheTensor) {
  const Problem p = Problem::forward({2, 1, 1, 2, 2, 4, 4}, DType::bf16).set_seq_len_q();
  Result<TensorBuffers> b = TensorBuffers::create(p, Memory::host);
  ASSERT_TRUE(b.ok());
  Status st = b->upload(TensorId::q, iota({2, 1, 2, 3}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(
                "tensor 'q': upload shape (2, 1, 2, 3) must equal the tensor's dims (2, 1, 2, 4)"),
            std::string::npos)
      << st.message();
  HostArray lens;
  lens.shape = {2};
  lens.data = {2, 1.5f};
  st = b->upload(TensorId::seq_len_q, lens);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("tensor 'seq_len_q' element [1] = 1.5: must be an integer"),
            std::string::npos)
      << st.message();
  lens.data = {2, 1};
  ASSERT_TRUE(b->upload(TensorId::seq_len_q, lens).ok());
  EXPECT_EQ(static_cast<const int32_t*>(b->arguments().get(TensorId::seq_len_q))[1], 1);
  st = b->upload(TensorId::bias, iota({1}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("tensor 'bias'"), std::string::npos);

  Problem negative = p;
  negative.set_strides(TensorId::k, {8, 8, -4, 1});
  Result<TensorBuffers> nb = TensorBuffers::create(negative, Memory::host);
  ASSERT_FALSE(nb.ok());
  EXPECT_NE(nb.status().message().find("tensor 'k' strides[2] = -4"), std::string::npos);
}

TEST(GuardedBlockTest, WorkspaceCanaries) {
  Result<GuardedBlock> ws = GuardedBlock::create(1000, Memory::host, "workspace");
  ASSERT_TRUE(ws.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ws->payload()) % 256, 0u);
  EXPECT_EQ(ws->total_bytes(), 256u + 1024u + 256u);
  ASSERT_TRUE(ws->fill_payload(0xFF).ok());
  EXPECT_TRUE(ws->check_canaries().ok());
  static_cast<unsigned char*>(ws->payload())[1000] = 0;
  const Status st = ws->check_canaries();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("workspace: canary damaged at byte offset 1000 (after"),
            std::string::npos)
      << st.message();
}

// ---------------------------------------------------------------- run_case (reference engine)

TEST(RunCase, ForwardOnTheReferenceEngine) {
  const Problem p = gappy_problem();
  Case c;
  c.dir = "in memory";
  c.problem = p;
  c.inputs = inputs_for(p);
  Result<RunResult> r = run_case(c, "auto", Memory::host);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->engine, "reference");
  ASSERT_EQ(r->outputs.size(), 2u);
  EXPECT_EQ(r->outputs.at("o").shape, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(r->outputs.at("stats").shape, (std::vector<int64_t>{1, 2, 3}));
  for (const auto& [name, a] : r->outputs) {
    for (float x : a.data) EXPECT_TRUE(std::isfinite(x)) << name;
  }
  // Pinning an engine that cannot serve the target is refused by name.
  Result<RunResult> g = run_case(c, "generic", Memory::host);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("generic"), std::string::npos);
}

TEST(RunCase, InvalidProblemIsRefusedBeforeAnyBuffer) {
  Case c;
  c.problem = Problem::forward({1, 3, 2, 2, 2, 4, 4}, DType::bf16);  // h_q % h_kv != 0
  c.inputs = inputs_for(c.problem);
  Result<RunResult> r = run_case(c, "auto", Memory::host);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::invalid_problem);
}

// ---------------------------------------------------------------- device memory (skipped without a
// GPU)

class OnDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(OnDevice, BuffersLayOutPoisonAndCheckLikeTheHost) {
  const Problem p = gappy_problem();
  Result<TensorBuffers> b = TensorBuffers::create(p, Memory::device);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->memory(), Memory::device);
  const HostArray q = iota({1, 2, 3, 4}, 0.0123f);
  ASSERT_TRUE(b->upload(TensorId::q, q).ok());
  ASSERT_TRUE(b->poison_outputs().ok());
  // The device image equals the host's, byte for byte.
  Result<TensorBuffers> h = TensorBuffers::create(p, Memory::host);
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(h->upload(TensorId::q, q).ok());
  ASSERT_TRUE(h->poison_outputs().ok());
  for (TensorId id : {TensorId::q, TensorId::o, TensorId::stats}) {
    const size_t bytes = p.tensor(id)->span_bytes();
    std::vector<unsigned char> dev(bytes + 512);
    ASSERT_EQ(cudaMemcpy(dev.data(), static_cast<char*>(b->arguments().get(id)) - 256, dev.size(),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(std::memcmp(dev.data(), static_cast<char*>(h->arguments().get(id)) - 256, dev.size()),
              0)
        << to_string(id);
  }
  Result<HostArray> back = b->download(TensorId::q);
  ASSERT_TRUE(back.ok());
  for (size_t i = 0; i < q.data.size(); ++i) {
    EXPECT_EQ(back->data[i], detail::round_to(DType::bf16, q.data[i]));
  }
  EXPECT_TRUE(b->check_guards().ok()) << b->check_guards().message();

  // Damage planted on the device is found and named.
  auto* qp = static_cast<unsigned char*>(b->arguments().get(TensorId::q));
  ASSERT_EQ(cudaMemset(qp + 10, 0, 1), cudaSuccess);  // a gap (element 5)
  ASSERT_EQ(cudaMemset(qp + 88, 0, 1), cudaSuccess);  // just past the span
  const Status st = b->check_guards();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("tensor 'q': canary damaged at byte offset 88"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("stride gap damaged at byte offset 10 (element 5)"),
            std::string::npos)
      << st.message();
}

TEST_F(OnDevice, WorkspaceBlockCanaries) {
  Result<GuardedBlock> ws = GuardedBlock::create(300, Memory::device, "workspace");
  ASSERT_TRUE(ws.ok()) << ws.status().message();
  ASSERT_TRUE(ws->fill_payload(0xFF).ok());
  EXPECT_TRUE(ws->check_canaries().ok());
  ASSERT_EQ(cudaMemset(static_cast<char*>(ws->payload()) - 3, 0, 1), cudaSuccess);
  const Status st = ws->check_canaries();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("workspace: canary damaged at byte offset -3"), std::string::npos)
      << st.message();
}

// The whole run on the device against the reference on the host: same case, outputs close
// (the GPU engines compute in fp32; a few bf16 ulps is the most a correct one is off).
TEST_F(OnDevice, RunCaseAgreesWithTheReference) {
  for (bool backward : {false, true}) {
    const Shape shape{2, 4, 2, 17, 33, 32, 16};
    Problem p =
        backward ? Problem::backward(shape, DType::bf16) : Problem::forward(shape, DType::bf16);
    p.set_causal(MaskAlign::bottom_right).set_strides(TensorId::q, {4 * 17 * 40, 40, 4 * 40, 1});
    if (!backward) p.set_stats();
    Case c;
    c.problem = p;
    c.inputs = inputs_for(p);
    if (backward) {
      Case f;
      f.problem =
          Problem::forward(shape, DType::bf16).set_causal(MaskAlign::bottom_right).set_stats();
      f.inputs = inputs_for(f.problem);
      for (const char* n : {"q", "k", "v"}) c.inputs[n] = f.inputs[n];
      Result<RunResult> fr = run_case(f, "reference", Memory::host);
      ASSERT_TRUE(fr.ok()) << fr.status().message();
      c.inputs["o"] = fr->outputs.at("o");
      c.inputs["stats"] = fr->outputs.at("stats");
    }
    Result<RunResult> dev = run_case(c, "auto", Memory::device);
    ASSERT_TRUE(dev.ok()) << (backward ? "backward: " : "forward: ") << dev.status().message();
    Result<RunResult> ref = run_case(c, "reference", Memory::host);
    ASSERT_TRUE(ref.ok()) << ref.status().message();
    EXPECT_NE(dev->engine, "reference");
    EXPECT_GT(dev->milliseconds, 0.0);
    for (const auto& [name, want] : ref->outputs) {
      const HostArray& got = dev->outputs.at(name);
      ASSERT_EQ(got.shape, want.shape) << name;
      double worst = 0;
      for (size_t i = 0; i < want.data.size(); ++i) {
        const double w = want.data[i], g = got.data[i];
        if (std::isinf(w) && g == w) continue;
        worst = std::max(worst, std::abs(g - w) / (std::abs(w) + 1e-2));
      }
      EXPECT_LT(worst, 3e-2) << (backward ? "backward " : "forward ") << name << " on "
                             << dev->engine;
    }
  }
}

}  // namespace
}  // namespace floe::tool
