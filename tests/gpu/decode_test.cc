// The decode engine (split-KV, s_q <= 16) against the reference engine on the same inputs:
// dense, ragged and paged K/V (pages 16, 32, 64, 256; NHD and HND), GQA packs of 1 to 16 heads,
// s_q 1 to 16, d 64 and 128, random device lengths including 0 and 1, Zipf-skewed lengths (one
// sequence at the envelope, the rest short, zeros among them), masks aligned bottom-right,
// sinks, softcap, both stats layouts, ragged query slots (padding and tokens past the last slot
// must stay untouched), the batch-invariant split_tokens mode; one captured graph replayed over
// several length vectors, bitwise equal to direct executes; and batch invariance itself. Skips
// without a GPU. A failing case is written as a case folder (split_tokens included).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "case_folder.h"
#include "floe/floe.h"
#include "support/harness_gpu_test.h"
#include "support/host_arrays.h"

namespace floe::tool {
namespace {

using test::int_array;
using test::random_array;

namespace fs = std::filesystem;

struct Config {
  const char* name;
  int64_t b, h_q, h_kv, s_q, s_kv, d;
  int64_t page;  // 0: dense (or ragged) K/V
  bool ragged_q = false, ragged_kv = false, causal = false, sink = false, softcap = false;
  bool seq_len_q = false, heads_major_stats = false, hnd = false;
  int64_t window_left = -1;  // >= 0: a sliding window (bottom-right)
  int64_t split_tokens = 0;  // > 0: batch-invariant splits
  DType dtype = DType::bf16;
  bool zipf = false;  // key lengths by Zipf's law (see zipf_lengths)
};

// Key lengths in [0, s_kv], with a 0 and a 1 among them (b >= 3).
std::vector<int64_t> key_lengths(std::mt19937& rng, int64_t b, int64_t s_kv) {
  std::vector<int64_t> len;
  for (int64_t i = 0; i < b; ++i) {
    len.push_back(i == 1 ? 0 : i == 2 ? 1 : std::uniform_int_distribution<int64_t>(2, s_kv)(rng));
  }
  if (b > 3) len[3] = s_kv;  // the envelope itself
  return len;
}

// Key lengths of rank r proportional to 1 / r, the longest at the envelope, in a random order,
// with two zeros: the device schedule must spread the long one over many CTAs while the short
// ones share the rest.
std::vector<int64_t> zipf_lengths(std::mt19937& rng, int64_t b, int64_t s_kv) {
  std::vector<int64_t> len;
  for (int64_t r = 0; r < b; ++r) len.push_back(s_kv / (r + 1));
  if (b > 4) len[b - 1] = len[b - 2] = 0;
  std::shuffle(len.begin(), len.end(), rng);
  return len;
}

std::vector<int64_t> lengths_of(const Config& cfg, std::mt19937& rng) {
  return cfg.zipf ? zipf_lengths(rng, cfg.b, cfg.s_kv) : key_lengths(rng, cfg.b, cfg.s_kv);
}

Case make_case(const Config& cfg, uint32_t seed) {
  std::mt19937 rng(seed);
  const Shape s{cfg.b, cfg.h_q, cfg.h_kv, cfg.s_q, cfg.s_kv, cfg.d, cfg.d};
  Problem p = Problem::forward(s, cfg.dtype);
  Case c;
  std::vector<int64_t> oq, okv, lkv = lengths_of(cfg, rng), lq;
  int64_t tq = 0, tkv = 0;
  if (cfg.ragged_q) {  // slots of 0 .. s_q + 2 tokens (wider than the envelope sometimes)
    oq = {0};
    for (int64_t i = 0; i < cfg.b; ++i) {
      oq.push_back(oq.back() + std::uniform_int_distribution<int64_t>(0, cfg.s_q + 2)(rng));
    }
    tq = oq.back() + 3;  // tokens past the last slot
    p.set_ragged_q(tq);
  }
  if (cfg.ragged_kv) {
    okv = {0};
    for (int64_t i = 0; i < cfg.b; ++i) okv.push_back(okv.back() + lkv[i] + (i % 2) * 5);
    tkv = okv.back() + 7;
    p.set_ragged_kv(tkv);
  }
  int64_t max_pages = 0, num_pages = 0;
  if (cfg.page) {
    max_pages = (cfg.s_kv + cfg.page - 1) / cfg.page;
    num_pages = cfg.b * max_pages + 3;
    p.set_paged_kv(cfg.page, num_pages);
  }
  if (cfg.seq_len_q) p.set_seq_len_q();
  if (!cfg.ragged_kv) p.set_seq_len_kv();
  if (cfg.causal) p.set_causal(MaskAlign::bottom_right);
  if (cfg.window_left >= 0) p.set_window(cfg.window_left, 0, MaskAlign::bottom_right);
  if (cfg.sink) p.set_sink();
  if (cfg.softcap) p.set_softcap(15.0);
  if (cfg.split_tokens > 0) p.set_split_tokens(cfg.split_tokens);
  p.set_stats();
  if (cfg.heads_major_stats) {
    p.set_strides(TensorId::stats,
                  cfg.ragged_q ? std::initializer_list<int64_t>{1, tq}
                               : std::initializer_list<int64_t>{cfg.h_q * cfg.s_q, 1, cfg.h_q});
  }
  if (cfg.hnd && cfg.page) {
    const int64_t e = cfg.h_kv * cfg.page * cfg.d;
    p.set_strides(TensorId::k, {e, cfg.d, cfg.page * cfg.d, 1});
    p.set_strides(TensorId::v, {e, cfg.d, cfg.page * cfg.d, 1});
  }
  c.problem = p;
  for (const std::string& n : input_names(p)) {
    const TensorDesc& desc = *p.tensor(tensor_of(n));
    c.inputs[n] =
        random_array(std::vector<int64_t>(desc.dims.begin(), desc.dims.begin() + desc.rank), rng);
  }
  if (cfg.ragged_q) c.inputs["offsets_q"] = int_array({cfg.b + 1}, oq);
  if (cfg.ragged_kv) c.inputs["offsets_kv"] = int_array({cfg.b + 1}, okv);
  for (int64_t i = 0; i < cfg.b; ++i) {
    const int64_t slot = cfg.ragged_q ? std::min(oq[i + 1] - oq[i], cfg.s_q) : cfg.s_q;
    lq.push_back(i == 0 ? std::min<int64_t>(1, slot)
                        : std::uniform_int_distribution<int64_t>(0, slot)(rng));
  }
  if (cfg.seq_len_q) c.inputs["seq_len_q"] = int_array({cfg.b}, lq);
  if (p.has(TensorId::seq_len_kv)) c.inputs["seq_len_kv"] = int_array({cfg.b}, lkv);
  if (cfg.page) {
    // Every entry a real page (any length vector fits the table), in a random order.
    std::vector<int64_t> pages(static_cast<size_t>(num_pages));
    for (int64_t i = 0; i < num_pages; ++i) pages[i] = i;
    std::shuffle(pages.begin(), pages.end(), rng);
    std::vector<int64_t> table(pages.begin(), pages.begin() + cfg.b * max_pages);
    c.inputs["block_table"] = int_array({cfg.b, max_pages}, table);
  }
  return c;
}

// Element-wise agreement: untouched (NaN) where the reference left the poison, -inf where it
// wrote -inf, else within the tolerance of the output's dtype.
int compare(const std::string& what, const HostArray& got, const HostArray& want, DType dtype,
            bool is_stats) {
  int bad = 0;
  const double rtol = is_stats ? 1e-4 : (dtype == DType::bf16 ? 2e-2 : 4e-3);
  const double atol = is_stats ? 1e-4 : rtol;
  if (got.data.size() != want.data.size()) {
    ADD_FAILURE() << what << ": " << got.data.size() << " elements, want " << want.data.size();
    return 1;
  }
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
      ADD_FAILURE() << what << " element " << i << ": decode " << g << ", reference " << w;
    }
  }
  return bad;
}

void check(const Case& c, const std::string& name) {
  Result<RunResult> gpu = run_case(c, "decode", Memory::device);
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  Result<RunResult> ref = run_case(c, "reference", Memory::host);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  int bad = 0;
  for (const auto& [out, want] : ref->outputs) {
    bad += compare(name + " " + out, gpu->outputs.at(out), want, c.problem.dtype(), out == "stats");
  }
  if (bad) {
    const fs::path dir = fs::path(FLOE_BINARY_DIR) / "test_tmp" / "decode_failures" / name;
    fs::remove_all(dir);
    const Status st = write_case(dir.string(), c.problem, c.inputs);
    ADD_FAILURE() << "reproduce: floe run --device cuda --engine decode " << dir.string()
                  << (st.ok() ? "" : " (could not write: " + st.message() + ")");
  }
}

const Config kConfigs[] = {
    {"dense_d128_gqa4", 5, 8, 2, 1, 700, 128, 0},
    {"dense_d64_mha_causal_sink_softcap_f16", 4, 4, 4, 4, 300, 64, 0, false, false, true, true,
     true, true, false, false, -1, 0, DType::f16},
    {"paged16_d128_gqa4_long", 5, 8, 2, 1, 3000, 128, 16},
    {"paged64_d128_gqa8_spec_window_f16", 4, 16, 2, 2, 1200, 128, 64, false, false, false, false,
     false, true, false, false, 100, 0, DType::f16},
    {"paged256_d64_gqa16_3rowtiles_hnd", 3, 32, 2, 3, 900, 64, 256, false, false, true, false,
     false, false, true, true},
    {"paged32_ragged_q_causal_sink_heads_major", 6, 8, 2, 4, 500, 128, 32, true, false, true, true,
     false, false, true},
    {"ragged_kv_d128_gqa4", 5, 8, 2, 1, 400, 128, 0, false, true},
    {"paged16_split96_causal_sink", 5, 8, 2, 3, 1500, 128, 16, false, false, true, true, false,
     true, false, false, -1, 96},
    {"dense_split256_d64", 4, 8, 1, 1, 2000, 64, 0, false, false, false, false, false, false, false,
     false, -1, 256, DType::f16},
    {"paged16_d128_sq16_gqa4_causal", 3, 8, 2, 16, 800, 128, 16, false, false, true, false, false,
     true},
    // 128 x 8 kv heads: a grid of many waves, which takes the two-stage d128 kernel.
    {"paged16_d128_b128_two_stages_sink", 128, 16, 8, 1, 200, 128, 16, false, false, true, true},
    // Splits of more than 8 tiles (256 units: one split a batch at d128, three at d64): the
    // ring of block table entries in shared memory wraps, at pages of 16 (4 entries a tile), 64
    // (1) and 256 (1 of 4 tiles' page). Small heads counts keep the CPU reference quick.
    {"paged16_d128_b32_long_splits_causal", 32, 8, 8, 1, 700, 128, 16, false, false, true},
    {"paged64_d64_b32_long_splits_hnd", 32, 8, 8, 1, 1600, 64, 64, false, false, false, false,
     false, false, false, true},
    {"paged256_d128_b32_long_splits", 32, 8, 8, 1, 900, 128, 256},
    // Zipf-skewed lengths: the envelope takes one split a batch (B 32 x 8 kv heads: 32 CTAs a
    // head), the device schedule's quota of 3 tiles cuts the longest (16 tiles) into 6 pieces
    // and gives a CTA several short batches; paged and dense, both stats layouts, GQA 1 and 4.
    // Envelopes of 1k keys: the K/V pools stay near the other cases' (~30M elements).
    // clang-format off
    {"paged16_d128_b32_zipf_causal", 32, 8, 8, 1, 1024, 128, 16, false, false, true, false,
     false, false, false, false, -1, 0, DType::bf16, true},
    {"dense_d128_b32_zipf_sink_heads_major", 32, 8, 8, 1, 1024, 128, 0, false, false, false,
     true, false, false, true, false, -1, 0, DType::bf16, true},
    {"paged64_d64_b16_zipf_window_hnd_f16", 16, 16, 4, 2, 5000, 64, 64, false, false, false,
     false, false, true, false, true, 700, 0, DType::f16, true},
    {"ragged_kv_d128_b24_zipf", 24, 4, 4, 1, 2500, 128, 0, false, true, false, false, false,
     false, true, false, -1, 0, DType::bf16, true},
    // clang-format on
};

class Decode : public test::GpuTest {};

TEST_F(Decode, ForwardMatchesReference) {
  uint32_t seed = 1600;
  for (const Config& cfg : kConfigs) {
    for (int rep = 0; rep < 2; ++rep) {
      const std::string name = std::string(cfg.name) + "_" + std::to_string(seed);
      SCOPED_TRACE(name);
      check(make_case(cfg, seed++), name);
    }
  }
}

TEST_F(Decode, ForwardIsPickedFirstForDecodeProblems) {
  const Case c = make_case(kConfigs[2], 7);
  Result<Target> target = Target::cuda();
  FLOE_ASSERT_OK(target);
  Result<Plan> plan = Plan::build(c.problem, *target);
  FLOE_ASSERT_OK(plan);
  EXPECT_EQ(plan->engine(), "decode") << plan->explain();
  // The battery above covers both d128 pipelines (on an H100/H200: 132 SMs).
  Result<Plan> many = Plan::build(make_case(kConfigs[10], 7).problem, *target);
  FLOE_ASSERT_OK(many);
  if (target->sm_count <= 132) {
    EXPECT_NE(many->explain().find("2 stages"), std::string::npos) << many->explain();
  }
  EXPECT_NE(plan->explain().find("3 stages"), std::string::npos) << plan->explain();
}

// P6 and P7: one captured graph replays over several length vectors (uploaded between replays,
// outside the graph) and gives bitwise what a direct execute gives for each.
TEST_F(Decode, ForwardGraphReplayEqualsDirect) {
  // Uniform-random, batch-invariant and Zipf-skewed envelopes; the replays alternate random
  // and Zipf vectors (one graph: the split schedule is the device's).
  for (const Config& cfg : {kConfigs[2], kConfigs[7], kConfigs[14]}) {
    SCOPED_TRACE(cfg.name);
    const Case base = make_case(cfg, 5151);
    const Problem& p = base.problem;
    Result<Target> target = Target::cuda();
    FLOE_ASSERT_OK(target);
    PlanOptions options;
    options.engine = "decode";
    Result<Plan> plan = Plan::build(p, *target, options);
    FLOE_ASSERT_OK(plan);
    Result<TensorBuffers> buf = TensorBuffers::create(p, Memory::device);
    FLOE_ASSERT_OK(buf);
    void* ws = nullptr;
    const size_t ws_bytes = plan->workspace_bytes();
    if (ws_bytes > 0) ASSERT_EQ(cudaSuccess, cudaMalloc(&ws, ws_bytes));
    for (const std::string& n : input_names(p)) {
      FLOE_ASSERT_OK(buf->upload(tensor_of(n), base.inputs.at(n)));
    }
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
      if (round > 0) {
        run.inputs["seq_len_kv"] =
            int_array({cfg.b}, round % 2 ? zipf_lengths(rng, cfg.b, cfg.s_kv)
                                         : key_lengths(rng, cfg.b, cfg.s_kv));
        std::vector<int64_t> lq;
        for (int64_t i = 0; i < cfg.b; ++i) {
          lq.push_back(std::uniform_int_distribution<int64_t>(0, cfg.s_q)(rng));
        }
        if (p.has(TensorId::seq_len_q)) run.inputs["seq_len_q"] = int_array({cfg.b}, lq);
      }
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
      Result<RunResult> ref = run_case(run, "reference", Memory::host);
      FLOE_ASSERT_OK(ref);
      size_t k = 0;
      for (const std::string& out : output_names(p)) {
        Result<HostArray> a = buf->download(tensor_of(out));
        FLOE_ASSERT_OK(a);
        const std::vector<float>& r = replayed[k++];
        ASSERT_EQ(r.size(), a->data.size());
        EXPECT_EQ(0, std::memcmp(r.data(), a->data.data(), r.size() * sizeof(float)))
            << out << ": the replay differs from the direct execute";
        EXPECT_EQ(0, compare(out, *a, ref->outputs.at(out), p.dtype(), out == "stats"));
      }
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
    if (ws) cudaFree(ws);
  }
}

// Batch invariance (split_tokens): the first two sequences of a batch of 5 give bitwise the
// same O and stats when run as a batch of 2 (another envelope b, another grid).
TEST_F(Decode, ForwardSplitTokensIsBatchInvariant) {
  Config big = kConfigs[7];
  big.seq_len_q = false;
  Case a = make_case(big, 31);
  const int64_t per_q = big.h_q * big.s_q * big.d;
  const int64_t max_pages = (big.s_kv + big.page - 1) / big.page;
  const int64_t page_elems = big.page * big.h_kv * big.d;
  // Batch 1 becomes a copy of batch 3 (the full-length sequence) with its own pages, so that
  // the batch of 2 below holds a short and a full sequence.
  std::vector<float>& q = a.inputs["q"].data;
  std::copy_n(q.begin() + 3 * per_q, per_q, q.begin() + per_q);
  std::vector<float>& table = a.inputs["block_table"].data;
  std::copy_n(table.begin() + 3 * max_pages, max_pages, table.begin() + max_pages);
  std::vector<float>& lens = a.inputs["seq_len_kv"].data;
  lens[1] = lens[3];

  Config small_cfg = big;
  small_cfg.b = 2;
  Case c = make_case(small_cfg, 31);  // the same problem at b = 2; inputs taken from `a`
  c.inputs["q"].data.assign(q.begin(), q.begin() + 2 * per_q);
  c.inputs["sink"] = a.inputs.at("sink");
  c.inputs["seq_len_kv"].data.assign(lens.begin(), lens.begin() + 2);
  std::vector<int64_t> small_table;
  for (const char* t : {"k", "v"}) c.inputs[t].data.assign(c.inputs[t].data.size(), 0.f);
  for (int64_t i = 0; i < 2 * max_pages; ++i) {
    const auto src = static_cast<int64_t>(table[static_cast<size_t>(i)]);
    small_table.push_back(i);
    for (const char* t : {"k", "v"}) {
      std::copy_n(a.inputs.at(t).data.begin() + src * page_elems, page_elems,
                  c.inputs[t].data.begin() + i * page_elems);
    }
  }
  c.inputs["block_table"] = int_array({2, max_pages}, small_table);

  Result<RunResult> ra = run_case(a, "decode", Memory::device);
  FLOE_ASSERT_OK(ra);
  Result<RunResult> rc = run_case(c, "decode", Memory::device);
  FLOE_ASSERT_OK(rc);
  for (const char* out : {"o", "stats"}) {
    const std::vector<float>& x = ra->outputs.at(out).data;
    const std::vector<float>& y = rc->outputs.at(out).data;
    const size_t n = y.size();  // the small case's outputs: the first two batches
    ASSERT_LE(n, x.size());
    EXPECT_EQ(0, std::memcmp(x.data(), y.data(), n * sizeof(float)))
        << out << ": the batch of 2 differs from the first two sequences of the batch of 5";
  }
}

}  // namespace
}  // namespace floe::tool
