// Ragged (THD) problems, forward and backward, and paged forwards on the generic and sm80
// engines, and ragged forwards on sm90, each pinned (DESIGN 2.1, 2.2), against the reference engine
// on the same inputs: packed and padded slots, zero lengths, slots wider than the envelope, tokens
// past the last slot (which must stay untouched), i32 and i64 offsets, both stats layouts, pages of
// 1, 16, 48, 64 and 128 in any order, NHD and HND strides; and one plan executed over several
// length vectors, directly and as a captured graph. Skips without a GPU. A failing case is written
// as a case folder that `floe run --device cuda --engine ENGINE` reproduces. sm80 and sm90 run at d
// 128 (the tile of the ci kernel set).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <cuda_runtime_api.h>

#include "case_folder.h"
#include "floe/floe.h"
#include "support/harness_gpu_test.h"
#include "support/host_arrays.h"
#include "support/scoped_env.h"

namespace floe::tool {
namespace {

using test::int_array;
using test::random_array;

namespace fs = std::filesystem;

// Offsets of b slots of random widths in [0, envelope + 70] (wider than the envelope by more
// than a tile sometimes), one of them empty, and a tail of tokens past the last slot.
std::vector<int64_t> random_offsets(std::mt19937& rng, int64_t b, int64_t envelope,
                                    int64_t* total) {
  std::uniform_int_distribution<int64_t> width(0, envelope + 70);
  std::vector<int64_t> off = {0};
  for (int64_t i = 0; i < b; ++i) off.push_back(off.back() + (i == 1 ? 0 : width(rng)));
  *total = off.back() + 5;
  return off;
}

struct Config {
  const char* name;
  bool ragged_q, ragged_kv;
  int64_t page;  // 0: no pages
  bool seq_len_q, causal, extras, heads_major_stats, i64, hnd;
  DType dtype;
  bool backward = false;
};

// A random problem of the config with its inputs. A backward's O and stats are what the
// reference forward makes of the same inputs (dO is random): random stats would make
// P = exp(S - LSE) far above 1 and dS past f16's range in the tensor-core engines, whose dS is
// an MMA operand in the input dtype, for a problem no forward can produce.
Case make_case(const Config& cfg, uint32_t seed, int64_t d = 64) {
  std::mt19937 rng(seed);
  const int64_t b = 5, h_q = 8, h_kv = 2, s_q = 150, s_kv = 300;
  const Shape s{b, h_q, h_kv, s_q, s_kv, d, d};
  Case c;
  const DType od = cfg.i64 ? DType::i64 : DType::i32;
  int64_t tq = 0, tkv = 0;
  std::vector<int64_t> oq, okv;
  if (cfg.ragged_q) oq = random_offsets(rng, b, s_q, &tq);
  if (cfg.ragged_kv) okv = random_offsets(rng, b, s_kv, &tkv);
  const int64_t max_pages = cfg.page ? (s_kv + cfg.page - 1) / cfg.page : 0;
  const int64_t num_pages = b * max_pages + 3;
  const auto build = [&](bool backward) {
    Problem p = backward ? Problem::backward(s, cfg.dtype) : Problem::forward(s, cfg.dtype);
    if (cfg.ragged_q) p.set_ragged_q(tq, od);
    if (cfg.ragged_kv) p.set_ragged_kv(tkv, od);
    if (cfg.page) p.set_paged_kv(cfg.page, num_pages);
    if (cfg.seq_len_q) p.set_seq_len_q();
    if (cfg.page == 0 && !cfg.ragged_kv) p.set_seq_len_kv();
    if (cfg.causal) p.set_causal(MaskAlign::bottom_right);
    if (cfg.extras) p.set_bias(b, 1).set_sink().set_softcap(20.0);
    if (!backward) p.set_stats();
    if (cfg.heads_major_stats) {
      p.set_strides(TensorId::stats, cfg.ragged_q
                                         ? std::initializer_list<int64_t>{1, tq}
                                         : std::initializer_list<int64_t>{h_q * s_q, 1, h_q});
    }
    if (cfg.hnd && cfg.page) {
      p.set_strides(TensorId::k, {h_kv * cfg.page * d, d, cfg.page * d, 1});
      p.set_strides(TensorId::v, {h_kv * cfg.page * d, d, cfg.page * d, 1});
    }
    return p;
  };
  const Problem p = build(cfg.backward);
  c.problem = p;
  for (const std::string& n : input_names(p)) {
    const TensorDesc& desc = *p.tensor(tensor_of(n));
    c.inputs[n] =
        random_array(std::vector<int64_t>(desc.dims.begin(), desc.dims.begin() + desc.rank), rng);
  }
  if (cfg.ragged_q) c.inputs["offsets_q"] = int_array({b + 1}, oq);
  if (cfg.ragged_kv) c.inputs["offsets_kv"] = int_array({b + 1}, okv);
  std::vector<int64_t> lq, lkv;
  for (int64_t i = 0; i < b; ++i) {
    const int64_t slot = cfg.ragged_q ? oq[i + 1] - oq[i] : s_q;
    lq.push_back(std::uniform_int_distribution<int64_t>(0, std::min(slot, s_q))(rng));
    lkv.push_back(i == 2 ? 0 : std::uniform_int_distribution<int64_t>(1, s_kv)(rng));
  }
  if (cfg.seq_len_q) c.inputs["seq_len_q"] = int_array({b}, lq);
  if (p.has(TensorId::seq_len_kv)) c.inputs["seq_len_kv"] = int_array({b}, lkv);
  if (cfg.page) {
    std::vector<int64_t> pages(static_cast<size_t>(num_pages));
    for (int64_t i = 0; i < num_pages; ++i) pages[i] = i;
    std::shuffle(pages.begin(), pages.end(), rng);
    std::vector<int64_t> table;
    for (int64_t i = 0; i < b; ++i) {
      for (int64_t j = 0; j < max_pages; ++j) {
        table.push_back(j * cfg.page < lkv[i] ? pages[i * max_pages + j] : -1);
      }
    }
    c.inputs["block_table"] = int_array({b, max_pages}, table);
  }
  if (cfg.backward) {
    Case forward;
    forward.problem = build(false);
    forward.inputs = c.inputs;
    Result<RunResult> out = run_case(forward, "reference", Memory::host);
    if (out.ok()) {
      c.inputs["o"] = out->outputs.at("o");
      c.inputs["stats"] = out->outputs.at("stats");
    } else {
      ADD_FAILURE() << "the reference forward of a backward case: " << out.status().message();
    }
  }
  return c;
}

// Element-wise agreement: untouched (NaN) where the reference left the poison, -inf where it
// wrote -inf, else within the tolerance of the output's dtype (absolute at the scale of the
// tensor's largest finite value: gradients cancel).
int compare(const std::string& what, const HostArray& got, const HostArray& want, DType dtype,
            bool is_stats) {
  int bad = 0;
  double scale = 1.0;
  for (float w : want.data) {
    if (std::isfinite(w)) scale = std::max(scale, static_cast<double>(std::fabs(w)));
  }
  const double rtol = is_stats ? 1e-4 : (dtype == DType::bf16 ? 2e-2 : 4e-3);
  const double atol = is_stats ? 1e-4 : rtol * scale;
  for (size_t i = 0; i < want.data.size(); ++i) {
    const float g = got.data[i], w = want.data[i];
    bool ok;
    if (std::isnan(w)) {
      ok = std::isnan(g);
    } else if (std::isinf(w)) {
      ok = g == w;
    } else {
      ok = std::fabs(g - w) <= atol + rtol * std::fabs(w);
    }
    if (!ok && bad++ < 3) {
      ADD_FAILURE() << what << " element " << i << ": got " << g << ", reference " << w;
    }
  }
  return bad;
}

void check(const Case& c, const std::string& name, const std::string& engine = "generic") {
  Result<RunResult> gpu = run_case(c, engine, Memory::device);
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  Result<RunResult> ref = run_case(c, "reference", Memory::host);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  int bad = 0;
  for (const auto& [out, want] : ref->outputs) {
    bad += compare(name + " " + out, gpu->outputs.at(out), want, c.problem.dtype(), out == "stats");
  }
  if (bad) {
    const fs::path dir =
        fs::path(FLOE_BINARY_DIR) / "test_tmp" / "serving_failures" / (engine + "_" + name);
    fs::remove_all(dir);
    const Status st = write_case(dir.string(), c.problem, c.inputs);
    ADD_FAILURE() << "reproduce: floe run --device cuda --engine " << engine << " " << dir.string()
                  << (st.ok() ? "" : " (could not write: " + st.message() + ")");
  }
}

class Serving : public test::GpuTest {};

// Every config below, each a forward or a backward of five batches (one of them empty).
std::vector<Config> serving_configs() {
  return {
      {"ragged_q", true, false, 0, false, false, false, false, false, false, DType::bf16},
      {"ragged_kv", false, true, 0, false, true, false, false, false, false, DType::f16},
      {"ragged_both_padded_causal", true, true, 0, true, true, false, true, false, false,
       DType::bf16},
      {"ragged_both_extras_i64", true, true, 0, true, false, true, false, true, false, DType::f16},
      {"paged64_dense_q", false, false, 64, true, true, false, false, false, false, DType::bf16},
      {"paged128_ragged_q_hnd", true, false, 128, false, true, true, true, true, true, DType::bf16},
      {"paged64_decode_heads_major", true, false, 64, false, false, false, true, false, false,
       DType::f16},
      {"paged1_ragged_q", true, false, 1, false, true, false, false, false, false, DType::bf16},
      {"paged16_dense_q_hnd_extras", false, false, 16, true, false, true, true, false, true,
       DType::f16},
      {"paged48_ragged_q_i64", true, false, 48, false, true, false, false, true, false,
       DType::bf16},
      {"bwd_ragged_q", true, false, 0, true, true, false, false, false, false, DType::bf16, true},
      {"bwd_ragged_kv", false, true, 0, false, false, true, true, false, false, DType::f16, true},
      {"bwd_ragged_both_extras_i64", true, true, 0, true, true, true, true, true, false,
       DType::bf16, true},
      {"bwd_ragged_both_plain_heads_major", true, true, 0, false, false, false, true, false, false,
       DType::f16, true},
  };
}

TEST_F(Serving, RaggedAndPagedMatchReference) {
  uint32_t seed = 900;
  for (const Config& cfg : serving_configs()) {
    for (int rep = 0; rep < 2; ++rep) {
      const std::string name = std::string(cfg.name) + "_" + std::to_string(seed);
      SCOPED_TRACE(name);
      check(make_case(cfg, seed++), name);
    }
  }
}

// sm80 pinned: its serving kernels (ragged rows at the slot's base, paged rows from the block
// table, one base per tile for pages of 64 and 128, a lookup per row for 1, 16 and 48).
// FLOE_SERVING_REPS: random cases per config (default 3; 1 under the sanitizers).
TEST_F(Serving, Sm80RaggedAndPagedMatchReference) {
  const char* reps_env = std::getenv("FLOE_SERVING_REPS");
  const int reps = reps_env != nullptr ? std::max(1, std::atoi(reps_env)) : 3;
  uint32_t seed = 1900;
  for (const Config& cfg : serving_configs()) {
    for (int rep = 0; rep < reps; ++rep) {
      const std::string name = std::string(cfg.name) + "_d128_" + std::to_string(seed);
      SCOPED_TRACE(name);
      check(make_case(cfg, seed++, 128), name, "sm80");
    }
  }
}

// sm90 pinned: its serving kernel (ragged sides loaded by TMA at each slot's first token, rows past
// a slot's keys masked and V's zeroed, O and stats written within the slot only, a slot's rows past
// the envelope zeroed by its head's last tile). Forward, no score mods (sm90 declines those): both
// sides packed, one packed side beside a dense one (which failed at 6c8b7bd, before
// fwd_mainloop.cuh's batch_coordinate), and paged caches (K/V boxes from the pages the block
// table names). Every config runs under the plan's schedule and under persistent CTAs that each
// walk many tiles (skipped tiles past short slots among them) in two orders. FLOE_SERVING_REPS:
// random cases per config and schedule (default 3; 1 under the sanitizers).
TEST_F(Serving, Sm90RaggedAndPagedForwardMatchesReference) {
  const char* reps_env = std::getenv("FLOE_SERVING_REPS");
  const int reps = reps_env != nullptr ? std::max(1, std::atoi(reps_env)) : 3;
  const Config configs[] = {
      {"ragged_q", true, false, 0, false, false, false, false, false, false, DType::bf16},
      {"ragged_kv_causal", false, true, 0, false, true, false, false, false, false, DType::f16},
      {"ragged_both_padded_causal_heads_major", true, true, 0, true, true, false, true, false,
       false, DType::bf16},
      {"ragged_both_padded_i64_f16", true, true, 0, true, false, false, false, true, false,
       DType::f16},
      {"ragged_q_padded_heads_major_i64", true, false, 0, true, false, false, true, true, false,
       DType::bf16},
      // Paged caches: pages smaller than the 128-key tile (boxes of a page),
      // as large, and larger (boxes of 128 rows inside a page), beside ragged and dense queries.
      {"paged16_ragged_q_causal", true, false, 16, false, true, false, false, false, false,
       DType::bf16},
      {"paged128_dense_q_lens", false, false, 128, true, false, false, false, false, false,
       DType::f16},
      {"paged256_ragged_q_hnd_heads_major_i64", true, false, 256, false, true, false, true, true,
       true, DType::bf16},
      {"paged64_dense_q_hnd_causal", false, false, 64, false, true, false, false, false, true,
       DType::bf16},
  };
  const floe::test::ScopedEnv schedule_knob("FLOE_SM90_FWD_SCHEDULE",
                                            std::getenv("FLOE_SM90_FWD_SCHEDULE"));
  uint32_t seed = 2900;
  for (const char* schedule : {"", "persistent:3", "lpts:2"}) {
    // An outer override stays in force; otherwise the plan's schedule first, then the two.
    if (*schedule != '\0') {
      if (schedule_knob.was_set()) continue;
      schedule_knob.set(schedule);
    }
    for (const Config& cfg : configs) {
      for (int rep = 0; rep < reps; ++rep) {
        const std::string name = std::string(cfg.name) + "_d128_" + std::to_string(seed) +
                                 (*schedule != '\0' ? std::string("_") + schedule : "");
        SCOPED_TRACE(name);
        const Case c = make_case(cfg, seed++, 128);
        check(c, name, "sm90");
      }
    }
  }
}

// One plan, one set of buffers, several length vectors: each execute equals the reference
// for its own offsets and lengths (no length reaches the host, P6).
void one_plan_serves_every_length_vector(const std::string& engine, int64_t d) {
  SCOPED_TRACE(engine);
  const Config cfg = {"plan", true, true, 0, true, true, false, false, false, false, DType::bf16};
  const Case base = make_case(cfg, 4242, d);
  const Problem& p = base.problem;
  const int64_t b = p.shape().b;
  Result<Target> target = Target::cuda();
  FLOE_ASSERT_OK(target);
  PlanOptions options;
  options.engine = engine;
  Result<Plan> plan = Plan::build(p, *target, options);
  FLOE_ASSERT_OK(plan);
  Result<TensorBuffers> buf = TensorBuffers::create(p, Memory::device);
  FLOE_ASSERT_OK(buf);
  std::mt19937 rng(77);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("length vector " + std::to_string(round));
    Case run = base;
    // Fresh slots that fit the plan's totals, and fresh valid lengths inside them.
    for (const auto& [name, total, envelope] :
         {std::tuple<const char*, int64_t, int64_t>{"offsets_q", p.ragged_q()->total,
                                                    p.shape().s_q},
          {"offsets_kv", p.ragged_kv()->total, p.shape().s_kv}}) {
      std::uniform_int_distribution<int64_t> width(0, (total - 1) / b);
      std::vector<int64_t> off = {0};
      for (int64_t i = 0; i < b; ++i) off.push_back(off.back() + width(rng));
      run.inputs[name] = int_array({b + 1}, off);
      if (std::string(name) == "offsets_q") {
        std::vector<int64_t> lens;
        for (int64_t i = 0; i < b; ++i) {
          const int64_t w = std::min(off[i + 1] - off[i], envelope);
          lens.push_back(std::uniform_int_distribution<int64_t>(0, w)(rng));
        }
        run.inputs["seq_len_q"] = int_array({b}, lens);
      }
    }
    run.inputs["q"] = random_array(base.inputs.at("q").shape, rng);
    for (const std::string& n : input_names(p)) {
      FLOE_ASSERT_OK(buf->upload(tensor_of(n), run.inputs.at(n)));
    }
    FLOE_ASSERT_OK(buf->poison_outputs());
    FLOE_ASSERT_OK(plan->execute(buf->arguments(), nullptr, 0, nullptr));
    ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
    FLOE_ASSERT_OK(buf->check_guards());
    Result<RunResult> ref = run_case(run, "reference", Memory::host);
    FLOE_ASSERT_OK(ref);
    for (const auto& [out, want] : ref->outputs) {
      Result<HostArray> got = buf->download(tensor_of(out));
      FLOE_ASSERT_OK(got);
      EXPECT_EQ(compare(out, *got, want, DType::bf16, out == "stats"), 0);
    }
  }
}

TEST_F(Serving, OnePlanServesEveryLengthVector) {
  one_plan_serves_every_length_vector("generic", 64);
  one_plan_serves_every_length_vector("sm80", 128);
  one_plan_serves_every_length_vector("sm90", 128);
}

// Fresh slots and valid lengths that fit the plan's totals (the envelope stays), written into
// `c`'s inputs.
void new_lengths(const Problem& p, std::mt19937& rng, Case& c) {
  const int64_t b = p.shape().b;
  for (const bool q_side : {true, false}) {
    const auto& side = q_side ? p.ragged_q() : p.ragged_kv();
    if (!side) continue;
    const int64_t envelope = q_side ? p.shape().s_q : p.shape().s_kv;
    std::uniform_int_distribution<int64_t> width(0, (side->total - 1) / b);
    std::vector<int64_t> off = {0};
    for (int64_t i = 0; i < b; ++i) off.push_back(off.back() + width(rng));
    c.inputs[q_side ? "offsets_q" : "offsets_kv"] = int_array({b + 1}, off);
    const char* len_name = q_side ? "seq_len_q" : "seq_len_kv";
    if (p.has(tensor_of(len_name))) {
      std::vector<int64_t> lens;
      for (int64_t i = 0; i < b; ++i) {
        const int64_t w = std::min(off[i + 1] - off[i], envelope);
        lens.push_back(std::uniform_int_distribution<int64_t>(0, w)(rng));
      }
      c.inputs[len_name] = int_array({b}, lens);
    }
  }
}

// P6: one captured graph replays over many length vectors (uploaded between replays, outside
// the graph) and gives bitwise what a direct execute gives for each.
// sm90 (forward only, no score mods): a forward without the extras.
void captured_graph_replays_over_length_vectors(const std::string& engine, int64_t d) {
  SCOPED_TRACE(engine);
  const bool sm90 = engine == "sm90";
  const Config configs[] = {
      {"graph_fwd", true, true, 0, true, true, !sm90, false, false, false, DType::bf16, false},
      {"graph_bwd", true, true, 0, true, true, true, true, false, false, DType::f16, true},
  };
  for (const Config& cfg : configs) {
    if (sm90 && cfg.backward) continue;
    SCOPED_TRACE(cfg.name);
    Case base = make_case(cfg, 5151, d);
    // A backward adds dQ in no fixed order unless asked for one (sm80's fp32 reductions); the
    // replays must match bit for bit, so ask (generic's order is fixed either way).
    if (cfg.backward) base.problem.set_deterministic();
    const Problem& p = base.problem;
    Result<Target> target = Target::cuda();
    FLOE_ASSERT_OK(target);
    PlanOptions options;
    options.engine = engine;
    Result<Plan> plan = Plan::build(p, *target, options);
    FLOE_ASSERT_OK(plan);
    Result<TensorBuffers> buf = TensorBuffers::create(p, Memory::device);
    FLOE_ASSERT_OK(buf);
    for (const std::string& n : input_names(p)) {
      FLOE_ASSERT_OK(buf->upload(tensor_of(n), base.inputs.at(n)));
    }
    void* ws = nullptr;
    const size_t ws_bytes = plan->workspace_bytes();
    if (ws_bytes > 0) ASSERT_EQ(cudaSuccess, cudaMalloc(&ws, ws_bytes));
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    const Status captured = plan->execute(buf->arguments(), ws, ws_bytes, stream);
    ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(stream, &graph));
    FLOE_ASSERT_OK(captured);
    ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&exec, graph, 0));

    std::mt19937 rng(99);
    for (int round = 0; round < 4; ++round) {
      SCOPED_TRACE("length vector " + std::to_string(round));
      Case run = base;
      if (round > 0) new_lengths(p, rng, run);
      for (const std::string& n : input_names(p)) {
        FLOE_ASSERT_OK(buf->upload(tensor_of(n), run.inputs.at(n)));
      }
      std::vector<std::vector<float>> replayed;
      FLOE_ASSERT_OK(buf->poison_outputs());
      ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, stream));
      ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream));
      for (const std::string& out : output_names(p)) {
        Result<HostArray> a = buf->download(tensor_of(out));
        FLOE_ASSERT_OK(a);
        replayed.push_back(a->data);
      }
      FLOE_ASSERT_OK(buf->poison_outputs());
      FLOE_ASSERT_OK(plan->execute(buf->arguments(), ws, ws_bytes, stream));
      ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream));
      FLOE_ASSERT_OK(buf->check_guards());
      size_t k = 0;
      for (const std::string& out : output_names(p)) {
        Result<HostArray> a = buf->download(tensor_of(out));
        FLOE_ASSERT_OK(a);
        const std::vector<float>& r = replayed[k++];
        ASSERT_EQ(r.size(), a->data.size());
        EXPECT_EQ(0, std::memcmp(r.data(), a->data.data(), r.size() * sizeof(float)))
            << out << ": the replay differs from the direct execute";
      }
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
    if (ws) cudaFree(ws);
  }
}

TEST_F(Serving, CapturedGraphReplaysOverLengthVectors) {
  captured_graph_replays_over_length_vectors("generic", 64);
  captured_graph_replays_over_length_vectors("sm80", 128);
  captured_graph_replays_over_length_vectors("sm90", 128);
}

}  // namespace
}  // namespace floe::tool
