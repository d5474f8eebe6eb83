// The sm80 engine's planning, without a GPU: which forward problems it takes on sm_80 and sm_90
// (and that it needs no workspace), and the exact reasons it gives when it declines, after which
// `generic` serves the problem. Kernels missing from the ci kernel set decline with their own
// reason; the tests accept that, so they hold for both kernel sets.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engines/sm80/bwd_kernels.h"
#include "engines/sm80/bwd_tiles.h"
#include "engines/sm80/fwd_kernels.h"
#include "engines/sm80/fwd_tiles.h"
#include "floe/floe.h"
#include "kernels/score_mod_kind.h"
#include "support/plan_verdicts.h"

namespace floe {
namespace {

// The verdict of one engine in a plan's explanation.
using test::verdict_of;

kernels::ScoreMod score_mod(const Problem& p) {
  return kernels::score_mod_for(p.softcap().has_value(), p.has(TensorId::bias),
                                !p.scale().has_value() || *p.scale() > 0);
}

// Whether the kernel sm80 would run for `p` on `target` is in this build's kernel set.
bool built(const Problem& p, const Target& target) {
  const TensorDesc& q = *p.tensor(TensorId::q);
  const TensorDesc& v = *p.tensor(TensorId::v);
  const auto dims = detail::sm80::head_dim_tile_for(q.dims[3], v.dims[3]);
  const size_t smem = target.smem_per_block_optin;
  if (p.direction() == Direction::backward) {
    return detail::sm80::find_bwd_kernel(detail::sm80::bwd_tile_for(dims, smem), p.dtype(),
                                         score_mod(p)) != nullptr;
  }
  return detail::sm80::find_fwd_kernel(detail::sm80::fwd_tile_for(dims, smem), p.dtype(),
                                       score_mod(p)) != nullptr;
}

struct Named {
  std::string name;
  Problem problem;
};

// Forward problems sm80 serves natively.
std::vector<Named> typical_forward_problems() {
  std::vector<Named> out;
  auto add = [&](std::string name, Problem p) { out.push_back({std::move(name), std::move(p)}); };
  add("d128 bf16", Problem::forward(Shape{2, 16, 16, 1024, 1024, 128, 128}, DType::bf16));
  add("d128 f16 causal stats", Problem::forward(Shape{2, 16, 16, 1000, 1000, 128, 128}, DType::f16)
                                   .set_causal()
                                   .set_stats());
  add("d64 f16", Problem::forward(Shape{4, 32, 32, 512, 512, 64, 64}, DType::f16));
  add("d8 bf16", Problem::forward(Shape{1, 2, 2, 17, 33, 8, 8}, DType::bf16));
  add("d96 bf16 (d128 tile)", Problem::forward(Shape{1, 4, 4, 300, 300, 96, 96}, DType::bf16));
  add("d256 bf16", Problem::forward(Shape{1, 8, 8, 4096, 4096, 256, 256}, DType::bf16));
  add("d192/128 bf16 causal",
      Problem::forward(Shape{1, 16, 16, 4096, 4096, 192, 128}, DType::bf16).set_causal());
  add("d64/128 f16", Problem::forward(Shape{1, 4, 4, 128, 256, 64, 128}, DType::f16));
  add("gqa 16:2", Problem::forward(Shape{2, 16, 2, 512, 512, 128, 128}, DType::bf16));
  add("mqa 8:1 decode", Problem::forward(Shape{8, 8, 1, 1, 4096, 128, 128}, DType::bf16));
  add("window bottom-right", Problem::forward(Shape{1, 8, 8, 100, 300, 128, 128}, DType::bf16)
                                 .set_window(64, 0, MaskAlign::bottom_right));
  add("band both sides",
      Problem::forward(Shape{1, 8, 8, 256, 256, 64, 64}, DType::f16).set_window(16, 16));
  add("padding by lengths", Problem::forward(Shape{3, 4, 4, 200, 300, 128, 128}, DType::bf16)
                                .set_seq_len_q()
                                .set_seq_len_kv());
  add("bias [1, Hq]",
      Problem::forward(Shape{2, 8, 8, 128, 128, 128, 128}, DType::bf16).set_bias(1, 8));
  add("bias [B, 1]", Problem::forward(Shape{2, 8, 8, 128, 128, 64, 64}, DType::f16).set_bias(2, 1));
  add("sink",
      Problem::forward(Shape{2, 8, 8, 128, 128, 128, 128}, DType::bf16).set_sink().set_stats());
  add("softcap",
      Problem::forward(Shape{2, 8, 8, 128, 128, 128, 128}, DType::bf16).set_softcap(30.0));
  add("negative scale",
      Problem::forward(Shape{1, 2, 2, 64, 64, 128, 128}, DType::bf16).set_scale(-0.1));
  {
    // BSHD: [B, S, H, D] in memory, described in logical [B, H, S, D] order; stats [B, S, H].
    const int64_t b = 2, h = 8, s = 512, d = 128;
    Problem p = Problem::forward(Shape{b, h, h, s, s, d, d}, DType::bf16).set_stats();
    for (TensorId id : {TensorId::q, TensorId::k, TensorId::v, TensorId::o}) {
      p.set_strides(id, {s * h * d, d, h * d, 1});
    }
    p.set_strides(TensorId::stats, {s * h, 1, h});
    add("bshd layout", std::move(p));
  }
  {
    // Rows padded to 136 elements, heads interleaved with gaps.
    Problem p = Problem::forward(Shape{2, 4, 2, 100, 120, 128, 128}, DType::f16);
    p.set_strides(TensorId::q, {4 * 100 * 136, 100 * 136, 136, 1});
    p.set_strides(TensorId::k, {2 * 120 * 256, 256, 2 * 256, 1});
    p.set_strides(TensorId::o, {100 * 4 * 136, 136, 4 * 136, 1});
    add("padded rows", std::move(p));
  }
  return out;
}

TEST(Sm80Plan, ServesTypicalForwardProblemsOnSm80AndSm90) {
  for (int arch : {80, 90}) {
    const Target target = Target::cuda_arch(arch);
    for (const Named& n : typical_forward_problems()) {
      SCOPED_TRACE(n.name + " on sm_" + std::to_string(arch));
      const bool is_built = built(n.problem, target);
      auto plan = Plan::build(n.problem, target);
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      const EngineVerdict* v = verdict_of(*plan, "sm80");
      ASSERT_NE(v, nullptr);
      // decode ranks first and takes s_q <= 16; then, on sm_90, the sm90 engine takes what it
      // serves natively.
      const EngineVerdict* vd = verdict_of(*plan, "decode");
      ASSERT_NE(vd, nullptr);
      const EngineVerdict* v90 = verdict_of(*plan, "sm90");
      ASSERT_NE(v90, nullptr);
      if (arch != 90) EXPECT_FALSE(v90->accepted);
      if (vd->accepted) {
        EXPECT_EQ(plan->engine(), "decode") << plan->explain();
      } else if (v90->accepted) {
        EXPECT_EQ(plan->engine(), "sm90") << plan->explain();
      } else if (is_built) {
        EXPECT_EQ(plan->engine(), "sm80") << plan->explain();
      }
      if (is_built) {
        EXPECT_TRUE(v->accepted) << v->reason;
        if (!vd->accepted) {
          EXPECT_EQ(plan->workspace_bytes(), 0u);
          EXPECT_TRUE(plan->workspace_chunks().empty());
        }
        EXPECT_NE(plan->explain().find("  sm80: accepted\n"), std::string::npos) << plan->explain();
      } else {
        EXPECT_NE(v->reason.find("kernel not built in the ci kernel set"), std::string::npos)
            << v->reason;
        if (!v90->accepted && !vd->accepted) EXPECT_EQ(plan->engine(), "generic");
      }
    }
  }
}

// Backward problems sm80 serves natively (head dims up to 128 so far).
std::vector<Named> typical_backward_problems() {
  std::vector<Named> out;
  auto add = [&](std::string name, Problem p) { out.push_back({std::move(name), std::move(p)}); };
  add("d128 bf16", Problem::backward(Shape{2, 16, 16, 1024, 1024, 128, 128}, DType::bf16));
  add("d128 f16 causal",
      Problem::backward(Shape{2, 16, 16, 1000, 1000, 128, 128}, DType::f16).set_causal());
  add("d64 f16", Problem::backward(Shape{4, 32, 32, 512, 512, 64, 64}, DType::f16));
  add("d8 bf16", Problem::backward(Shape{1, 2, 2, 17, 33, 8, 8}, DType::bf16));
  add("d64/128 f16", Problem::backward(Shape{1, 4, 4, 128, 256, 64, 128}, DType::f16));
  add("d192/128 bf16 causal",
      Problem::backward(Shape{1, 16, 16, 4096, 4096, 192, 128}, DType::bf16).set_causal());
  add("d256 bf16", Problem::backward(Shape{1, 8, 8, 4096, 4096, 256, 256}, DType::bf16));
  add("d160 f16 (d256 tile)", Problem::backward(Shape{1, 2, 2, 100, 90, 160, 160}, DType::f16));
  add("gqa 16:2", Problem::backward(Shape{2, 16, 2, 512, 512, 128, 128}, DType::bf16));
  add("deterministic gqa",
      Problem::backward(Shape{2, 16, 2, 512, 512, 128, 128}, DType::bf16).set_deterministic());
  add("window bottom-right", Problem::backward(Shape{1, 8, 8, 100, 300, 128, 128}, DType::bf16)
                                 .set_window(64, 0, MaskAlign::bottom_right));
  add("padding by lengths", Problem::backward(Shape{3, 4, 4, 200, 300, 128, 128}, DType::bf16)
                                .set_seq_len_q()
                                .set_seq_len_kv());
  add("bias [1, Hq], no gradient",
      Problem::backward(Shape{2, 8, 8, 128, 128, 128, 128}, DType::bf16)
          .set_bias(1, 8)
          .set_bias_grad(false));
  add("bias and dbias [B, Hq]",
      Problem::backward(Shape{2, 8, 8, 128, 128, 64, 64}, DType::f16).set_bias(2, 8));
  add("bias and dbias [1, Hq] (summed over the batch)",
      Problem::backward(Shape{2, 8, 8, 128, 128, 128, 128}, DType::bf16).set_bias(1, 8));
  add("bias and dbias [1, 1] (summed over batch and heads)",
      Problem::backward(Shape{2, 8, 2, 100, 300, 128, 128}, DType::bf16)
          .set_bias(1, 1)
          .set_causal());
  add("sink and dsink",
      Problem::backward(Shape{2, 8, 8, 128, 128, 128, 128}, DType::bf16).set_sink());
  add("softcap",
      Problem::backward(Shape{2, 8, 8, 128, 128, 128, 128}, DType::bf16).set_softcap(30.0));
  {
    const int64_t b = 2, h = 8, s = 512, d = 128;
    Problem p = Problem::backward(Shape{b, h, h, s, s, d, d}, DType::bf16);
    for (TensorId id : {TensorId::q, TensorId::k, TensorId::v, TensorId::o, TensorId::d_o,
                        TensorId::dq, TensorId::dk, TensorId::dv}) {
      p.set_strides(id, {s * h * d, d, h * d, 1});
    }
    p.set_strides(TensorId::stats, {s * h, 1, h});
    add("bshd layout", std::move(p));
  }
  return out;
}

TEST(Sm80Plan, ServesTypicalBackwardProblemsWithNamedWorkspaceChunks) {
  for (const Named& n : typical_backward_problems()) {
    SCOPED_TRACE(n.name);
    // Pinned: on sm_90 the sm90 engine ranks first and takes the backward problems it serves.
    const Target h100 = Target::cuda_arch(90);
    auto plan = Plan::build(n.problem, h100, PlanOptions{"sm80"});
    ASSERT_TRUE(plan.ok() || !built(n.problem, h100)) << plan.status().message();
    if (!built(n.problem, h100)) {
      EXPECT_NE(plan.status().message().find("kernel not built in the ci kernel set"),
                std::string::npos)
          << plan.status().message();
      continue;
    }
    const EngineVerdict* v = verdict_of(*plan, "sm80");
    ASSERT_NE(v, nullptr);
    ASSERT_EQ(plan->engine(), "sm80") << plan->explain();
    // O(B * H * S * D): the dQ accumulator at the compiled d_qk tile, LSE and Delta per query
    // row, all over whole query tiles; a semaphore per query tile when deterministic.
    const TensorDesc& q = *n.problem.tensor(TensorId::q);
    const TensorDesc& v_desc = *n.problem.tensor(TensorId::v);
    const auto& shape = detail::sm80::bwd_tile_shape(detail::sm80::bwd_tile_for(
        detail::sm80::head_dim_tile_for(q.dims[3], v_desc.dims[3]), h100.smem_per_block_optin));
    const size_t m_blocks = static_cast<size_t>((q.dims[2] + shape.block_m - 1) / shape.block_m);
    const size_t rows = static_cast<size_t>(q.dims[0] * q.dims[1]) * m_blocks * shape.block_m;
    std::vector<std::pair<std::string, size_t>> want = {
        {"dq_accum", rows * shape.d_qk * 4}, {"lse_log2", rows * 4}, {"delta", rows * 4}};
    if (n.problem.deterministic()) {
      want.push_back({"dq_semaphore", static_cast<size_t>(q.dims[0] * q.dims[1]) * m_blocks * 4});
    }
    // A bias gradient broadcast over the batch or the heads: an fp32 partial sum over whole
    // (query tile, key tile) tiles of the bias's shape, and a semaphore per tile.
    if (const auto& dbias = n.problem.tensor(TensorId::dbias);
        dbias &&
        ((dbias->dims[0] == 1 && q.dims[0] > 1) || (dbias->dims[1] == 1 && q.dims[1] > 1))) {
      const size_t n_blocks =
          static_cast<size_t>((dbias->dims[3] + shape.block_n - 1) / shape.block_n);
      const size_t tiles =
          static_cast<size_t>(dbias->dims[0] * dbias->dims[1]) * m_blocks * n_blocks;
      want.push_back({"dbias_accum", tiles * shape.block_m * shape.block_n * 4});
      want.push_back({"dbias_semaphore", tiles * 4});
    }
    const auto& chunks = plan->workspace_chunks();
    ASSERT_EQ(chunks.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(chunks[i].name, want[i].first);
      EXPECT_EQ(chunks[i].bytes, want[i].second) << chunks[i].name;
    }
  }
}

// Ragged sides (both directions) and paged K/V (forward) run sm80's serving kernels natively
// (DESIGN 2.1, 2.2): on sm_90 sm90 declines them and sm80, next in rank, takes them; the ci kernel
// set builds the d128 serving tile. No workspace forward; the backward's chunks are sized by the
// envelope (B x Hq x the query tiles of s_q), never by the packed totals.
TEST(Sm80Plan, ServesRaggedAndPagedProblemsNatively) {
  const Shape env{4, 16, 4, 700, 900, 128, 128};
  std::vector<Named> problems;
  problems.push_back(
      {"ragged q and kv, causal, valid lengths", Problem::forward(env, DType::bf16)
                                                     .set_ragged_q(2000)
                                                     .set_ragged_kv(2500, DType::i64)
                                                     .set_seq_len_q()
                                                     .set_causal(MaskAlign::bottom_right)
                                                     .set_stats()});
  problems.push_back({"ragged q, heads-major stats", Problem::forward(env, DType::f16)
                                                         .set_ragged_q(2000)
                                                         .set_stats()
                                                         .set_strides(TensorId::stats, {1, 2000})});
  problems.push_back({"paged 16, dense q", Problem::forward(env, DType::bf16)
                                               .set_paged_kv(16, 300)
                                               .set_seq_len_kv()
                                               .set_causal(MaskAlign::bottom_right)});
  problems.push_back({"paged 64, ragged q, softcap", Problem::forward(env, DType::bf16)
                                                         .set_ragged_q(2000)
                                                         .set_paged_kv(64, 80)
                                                         .set_seq_len_kv()
                                                         .set_softcap(30.0)});
  problems.push_back({"paged 48 (rows from the table), HND pages",
                      Problem::forward(env, DType::bf16)
                          .set_paged_kv(48, 100)
                          .set_seq_len_kv()
                          .set_strides(TensorId::k, {4 * 48 * 128, 128, 48 * 128, 1})
                          .set_strides(TensorId::v, {4 * 48 * 128, 128, 48 * 128, 1})});
  problems.push_back({"backward ragged q and kv", Problem::backward(env, DType::bf16)
                                                      .set_ragged_q(2000)
                                                      .set_ragged_kv(2500)
                                                      .set_causal(MaskAlign::bottom_right)});
  problems.push_back({"backward ragged q, bias [1, Hq]",
                      Problem::backward(env, DType::f16).set_ragged_q(2000).set_bias(1, 16)});
  for (const Named& n : problems) {
    SCOPED_TRACE(n.name);
    for (int arch : {80, 90}) {
      // Routed: sm80, or on Hopper sm90 (ranked first) for the ragged forwards it serves
      // (sm90_plan_test says which); pinned: sm80's own serving kernels.
      auto routed = Plan::build(n.problem, Target::cuda_arch(arch));
      ASSERT_TRUE(routed.ok()) << routed.status().message();
      EXPECT_TRUE(
          routed->engine() == "sm80" ||
          (arch == 90 && n.problem.direction() == Direction::forward && routed->engine() == "sm90"))
          << routed->explain();
      PlanOptions pin;
      pin.engine = "sm80";
      auto plan = Plan::build(n.problem, Target::cuda_arch(arch), pin);
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      EXPECT_EQ(plan->engine(), "sm80") << plan->explain();
      const EngineVerdict* v = verdict_of(*plan, "sm80");
      ASSERT_NE(v, nullptr);
      EXPECT_TRUE(v->accepted) << v->reason;
      EXPECT_NE(
          plan->explain().find(
              "sm80_" + std::string(n.problem.direction() == Direction::backward ? "bwd" : "fwd") +
              "_serving_d128_"),
          std::string::npos)
          << plan->explain();
      if (n.problem.direction() == Direction::forward) {
        EXPECT_EQ(plan->workspace_bytes(), 0u);
      } else {
        // A ragged query side packs the per-row chunks by head (bwd_params.h's ws_row): each
        // head holds total_q / 64 + b tiles of 64 rows (d128's visits), not b envelopes of 704.
        const size_t rows = size_t{16} * (2000 / 64 + 4) * 64;
        const auto& chunks = plan->workspace_chunks();
        ASSERT_GE(chunks.size(), 3u);
        EXPECT_EQ(chunks[0].name, "dq_accum");
        EXPECT_EQ(chunks[0].bytes, rows * 128 * 4);
        EXPECT_EQ(chunks[1].bytes, rows * 4);
      }
    }
  }
}

// What sm80 cannot serve of a ragged or paged problem: layouts its 16-byte row loads cannot
// address, named by tensor, field and rule (generic then serves them, or sm90 where its TMA
// loads can: 64-bit strides); a paged backward is refused by validation before any engine.
TEST(Sm80Plan, DeclinesServingLayoutsItCannotAddress) {
  const Shape env{2, 8, 2, 300, 600, 128, 128};
  struct Case {
    const char* name;
    Problem problem;
    std::string reason;
    const char* engine = "generic";
  };
  std::vector<Case> cases;
  cases.push_back({"ragged q, odd token stride",
                   Problem::forward(env, DType::bf16)
                       .set_ragged_q(500)
                       .set_strides(TensorId::q, {8 * 132 + 4, 132, 1}),
                   "tensor 'q' (ragged) strides[0] = 1060: sm80 needs 16-byte-aligned rows "
                   "(every outer stride a multiple of 8 elements)"});
  cases.push_back({"ragged kv, head dim strided",
                   Problem::forward(env, DType::f16)
                       .set_ragged_kv(900)
                       .set_strides(TensorId::v, {2 * 256, 256, 2}),
                   "tensor 'v' (ragged) strides[2] = 2: sm80 needs a unit innermost stride"});
  cases.push_back(
      {"paged, pages of whole tiles, page rows 2^27 apart",
       Problem::forward(env, DType::bf16)
           .set_paged_kv(64, 16)
           .set_seq_len_kv()
           .set_strides(TensorId::k, {int64_t{1} << 31, int64_t{1} << 27, 128, 1}),
       "tensor 'k' (paged) strides[1] = 134217728: sm80 addresses 64 rows at a time with "
       "32-bit offsets; 64 x strides[1] must stay below 2^31",
       "sm90"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto plan = Plan::build(c.problem, Target::cuda_arch(90));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_EQ(plan->engine(), c.engine) << plan->explain();
    const EngineVerdict* v = verdict_of(*plan, "sm80");
    ASSERT_NE(v, nullptr);
    EXPECT_FALSE(v->accepted);
    EXPECT_EQ(v->reason, c.reason);
  }
  auto paged_bwd =
      Plan::build(Problem::backward(env, DType::bf16).set_paged_kv(16, 64).set_seq_len_kv(),
                  Target::cuda_arch(90));
  ASSERT_FALSE(paged_bwd.ok());
  EXPECT_NE(paged_bwd.status().message().find("paged_kv: forward only"), std::string::npos)
      << paged_bwd.status().message();
}

// Behind decode (which takes only s_q <= 16) and sm90.
TEST(Sm80Plan, RanksSecondBehindSm90) {
  const std::vector<std::string> names = engine_names();
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(names[0], "decode");
  EXPECT_EQ(names[1], "sm90");
  EXPECT_EQ(names[2], "sm80");
}

TEST(Sm80Plan, TheCiKernelSetHoldsD128) {
  for (DType dt : {DType::f16, DType::bf16}) {
    for (kernels::ScoreMod mod : {kernels::ScoreMod::plain, kernels::ScoreMod::bias,
                                  kernels::ScoreMod::softcap, kernels::ScoreMod::softcap_bias}) {
      const auto* k = detail::sm80::find_fwd_kernel(detail::sm80::FwdTile::d128, dt, mod);
      ASSERT_NE(k, nullptr);
      // The bias kinds stage a 128 x (64 + 8)-element bias tile after V; still a 99 KB part's.
      const int staged_bias = kernels::has_bias_code(mod) ? 128 * (64 + 8) * 2 : 0;
      EXPECT_EQ(
          k->smem_bytes,
          detail::sm80::fwd_tile_shape(detail::sm80::FwdTile::d128).smem_bytes() + staged_bias);
      EXPECT_LE(k->smem_bytes, 99 * 1024);
      EXPECT_GT(k->threads, 0);
      const auto* b = detail::sm80::find_bwd_kernel(detail::sm80::BwdTile::d128, dt, mod);
      ASSERT_NE(b, nullptr);
      EXPECT_EQ(b->smem_bytes,
                detail::sm80::bwd_tile_shape(detail::sm80::BwdTile::d128).smem_bytes());
    }
  }
}

TEST(Sm80Plan, TileChoiceCoversEveryHeadDim) {
  using detail::sm80::bwd_tile_for;
  using detail::sm80::bwd_tile_shape;
  using detail::sm80::fwd_tile_for;
  using detail::sm80::fwd_tile_shape;
  using detail::sm80::head_dim_tile_for;
  using detail::sm80::HeadDimTile;
  // Every tile a class may pick, on any part, holds the class's head dims.
  for (int dqk = 8; dqk <= 256; dqk += 8) {
    for (int dv = 8; dv <= 256; dv += 8) {
      const HeadDimTile t = head_dim_tile_for(dqk, dv);
      for (size_t kb : {227, 163, 99, 48}) {
        EXPECT_GE(fwd_tile_shape(fwd_tile_for(t, kb * 1024)).d_qk, dqk);
        EXPECT_GE(fwd_tile_shape(fwd_tile_for(t, kb * 1024)).d_v, dv);
        EXPECT_GE(bwd_tile_shape(bwd_tile_for(t, kb * 1024)).d_qk, dqk);
        EXPECT_GE(bwd_tile_shape(bwd_tile_for(t, kb * 1024)).d_v, dv);
      }
    }
  }
  EXPECT_EQ(head_dim_tile_for(64, 64), HeadDimTile::d64);
  EXPECT_EQ(head_dim_tile_for(128, 128), HeadDimTile::d128);
  EXPECT_EQ(head_dim_tile_for(192, 128), HeadDimTile::d192_128);
  EXPECT_EQ(head_dim_tile_for(192, 192), HeadDimTile::d256);
}

struct Declined {
  std::string name;
  Problem problem;
  Target target;
  std::string reason;  // sm80's exact reason
  std::string chosen;  // the engine that serves the problem instead; empty: none does
};

std::vector<Declined> declined_problems() {
  std::vector<Declined> out;
  const Target h100 = Target::cuda_arch(90);
  {
    Problem p = Problem::forward(Shape{1, 2, 2, 64, 64, 64, 64}, DType::bf16);
    p.set_strides(TensorId::k, {2 * 64 * 128, 64 * 128, 128, 2});
    out.push_back({"k innermost stride", p, h100,
                   "tensor 'k' strides[3] = 2: sm80 needs a unit innermost stride", "generic"});
  }
  {
    Problem p = Problem::forward(Shape{1, 2, 2, 16, 16, 64, 64}, DType::f16);
    p.set_strides(TensorId::q, {2 * 16 * 100, 16 * 100, 100, 1});
    out.push_back({"q misaligned rows", p, h100,
                   "tensor 'q' strides[2] = 100: sm80 needs 16-byte-aligned rows (every outer "
                   "stride a multiple "
                   "of 8 elements)",
                   "decode"});  // s_q 16: decode takes any q and o strides
  }
  {
    Problem p = Problem::forward(Shape{2, 2, 2, 16, 16, 64, 64}, DType::bf16);
    p.set_strides(TensorId::o, {2 * 16 * 64 + 4, 16 * 64, 64, 1});
    out.push_back(
        {"o misaligned batch stride", p, h100,
         "tensor 'o' strides[0] = 2052: sm80 needs 16-byte-aligned rows (every outer stride a "
         "multiple of 8 elements)",
         "decode"});
  }
  {
    Problem p = Problem::forward(Shape{1, 2, 2, 16, 32, 64, 64}, DType::bf16).set_bias(1, 2);
    p.set_strides(TensorId::bias, {2 * 16 * 64, 16 * 64, 64, 2});
    out.push_back({"bias innermost stride", p, h100,
                   "tensor 'bias' strides[3] = 2: sm80 needs a unit innermost stride", "generic"});
  }
  out.push_back({"backward d_v above 256",
                 Problem::backward(Shape{1, 2, 2, 64, 64, 64, 264}, DType::bf16), h100,
                 "head dim d_v = 264: sm80 serves up to 256", "generic"});
  {
    Problem p = Problem::backward(Shape{2, 2, 2, 64, 64, 128, 128}, DType::bf16);
    p.set_strides(TensorId::d_o, {2 * 64 * 136 + 4, 64 * 136, 136, 1});
    out.push_back({"do misaligned batch stride", p, h100,
                   "tensor 'do' strides[0] = 17412: sm80 needs 16-byte-aligned rows (every outer "
                   "stride a multiple of 8 elements)",
                   "generic"});
  }
  out.push_back({"d_qk not a multiple of 8",
                 Problem::forward(Shape{1, 2, 2, 64, 64, 100, 64}, DType::bf16), h100,
                 "head dim d_qk = 100: sm80 needs a multiple of 8", "generic"});
  out.push_back({"d_v not a multiple of 8",
                 Problem::forward(Shape{1, 2, 2, 64, 64, 64, 36}, DType::f16), h100,
                 "head dim d_v = 36: sm80 needs a multiple of 8", "generic"});
  out.push_back({"d_qk above 256", Problem::forward(Shape{1, 2, 2, 64, 64, 264, 64}, DType::bf16),
                 h100, "head dim d_qk = 264: sm80 serves up to 256", "generic"});
  out.push_back({"d_v above 256", Problem::forward(Shape{1, 2, 2, 64, 64, 64, 512}, DType::bf16),
                 h100, "head dim d_v = 512: sm80 serves up to 256", "generic"});
  out.push_back({"sm_75", Problem::forward(Shape{1, 2, 2, 64, 64, 64, 64}, DType::f16),
                 Target::cuda_arch(75), "needs sm_80 or newer (target is sm_75)",
                 ""});  // no CUDA engine serves sm_75
  out.push_back({"cpu", Problem::forward(Shape{1, 2, 2, 64, 64, 64, 64}, DType::f16),
                 Target::cpu(1), "runs on CUDA devices only", "reference"});
  return out;
}

TEST(Sm80Plan, DeclinesWithTheExactReasonAndGenericServes) {
  for (const Declined& d : declined_problems()) {
    SCOPED_TRACE(d.name);
    auto plan = Plan::build(d.problem, d.target);
    if (d.chosen.empty()) {
      ASSERT_FALSE(plan.ok());
      EXPECT_NE(plan.status().message().find("  sm80: declined: " + d.reason + "\n"),
                std::string::npos)
          << plan.status().message();
      continue;
    }
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_EQ(plan->engine(), d.chosen) << plan->explain();
    const EngineVerdict* v = verdict_of(*plan, "sm80");
    ASSERT_NE(v, nullptr);
    EXPECT_FALSE(v->accepted);
    EXPECT_EQ(v->reason, d.reason);
    EXPECT_NE(plan->explain().find("  sm80: declined: " + d.reason + "\n"), std::string::npos)
        << plan->explain();
  }
}

TEST(Sm80Plan, PinningSm80ToADeclinedProblemFailsWithItsReason) {
  auto plan = Plan::build(Problem::backward(Shape{1, 2, 2, 64, 64, 264, 256}, DType::bf16),
                          Target::cuda_arch(90), PlanOptions{"sm80"});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Code::not_supported);
  EXPECT_NE(plan.status().message().find("sm80: declined: head dim d_qk = 264"), std::string::npos)
      << plan.status().message();
}

// The tile sm80 runs for each head-dim class on each class of part, chosen from the target's
// shared memory per block: the H200's (227 KB, sm80 pinned: sm90 ranks first there), the A100's
// (163 KB) and sm_86/sm_89's (99 KB). Written out here rather than derived from the tile tables,
// so that a change of either shows.
struct Routed {
  int arch;
  int d_qk, d_v;
  const char* fwd_tile;
  const char* bwd_tile;
};

std::vector<Routed> expected_routes() {
  std::vector<Routed> out;
  for (int arch : {90, 80, 86, 89}) {
    const bool small = arch == 86 || arch == 89;
    for (int d = 8; d <= 256; d += 8) {
      const char* fwd = d <= 64 ? "d64" : d <= 128 ? "d128" : small ? "d256m64" : "d256";
      const char* bwd = d <= 64      ? (small ? "d64m64" : "d64")
                        : d <= 128   ? (small ? "d128q1" : "d128")
                        : small      ? "d256m32"
                        : arch == 80 ? "d256q1"
                                     : "d256";
      out.push_back({arch, d, d, fwd, bwd});
    }
    out.push_back({arch, 192, 128, "d192x128", small ? "d192x128q1" : "d192x128"});
    out.push_back({arch, 64, 128, "d128", small ? "d128q1" : "d128"});
    out.push_back({arch, 256, 64, small ? "d256m64" : "d256",
                   small        ? "d256m32"
                   : arch == 80 ? "d256q1"
                                : "d256"});
  }
  return out;
}

// The kernel of tile `name` in this build, by name (nullptr: not built, or no such tile).
template <class Tile, int kCount, class Find>
bool tile_built(const char* const (&names)[kCount], const std::string& name, Find find) {
  for (int i = 0; i < kCount; ++i) {
    if (name == names[i])
      return find(static_cast<Tile>(i), DType::bf16, kernels::ScoreMod::plain) != nullptr;
  }
  ADD_FAILURE() << "no tile " << name;
  return false;
}

TEST(Sm80Plan, EveryHeadDimRoutesToTheTileOfEachPartClass) {
  namespace sm80 = detail::sm80;
  for (const Routed& r : expected_routes()) {
    const Target target = Target::cuda_arch(r.arch);
    for (bool backward : {false, true}) {
      const Shape shape{1, 4, 4, 256, 256, r.d_qk, r.d_v};
      const Problem p =
          backward ? Problem::backward(shape, DType::bf16) : Problem::forward(shape, DType::bf16);
      const std::string tile = backward ? r.bwd_tile : r.fwd_tile;
      SCOPED_TRACE("sm_" + std::to_string(r.arch) + (backward ? " backward" : " forward") +
                   " d_qk " + std::to_string(r.d_qk) + " d_v " + std::to_string(r.d_v) +
                   ", expected tile " + tile);
      auto plan = Plan::build(p, target, PlanOptions{"sm80"});
      const std::string prefix = backward ? "backward tile " : "tile ";
      const bool is_built =
          backward
              ? tile_built<sm80::BwdTile>(sm80::kBwdTileNames, tile,
                                          [](sm80::BwdTile t, DType dt, kernels::ScoreMod mod) {
                                            return sm80::find_bwd_kernel(t, dt, mod);
                                          })
              : tile_built<sm80::FwdTile>(sm80::kFwdTileNames, tile,
                                          [](sm80::FwdTile t, DType dt, kernels::ScoreMod mod) {
                                            return sm80::find_fwd_kernel(t, dt, mod);
                                          });
      if (!is_built) {
        ASSERT_FALSE(plan.ok());
        EXPECT_NE(plan.status().message().find("  sm80: declined: kernel not built in the ci "
                                               "kernel set (" +
                                               prefix + tile + ", bf16, plain)\n"),
                  std::string::npos)
            << plan.status().message();
        continue;
      }
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      EXPECT_EQ(plan->engine(), "sm80");
      const std::string kernel = std::string("plan: sm80_") + (backward ? "bwd_" : "fwd_") + tile +
                                 "_bf16_plain: tile " + tile + ", ";
      EXPECT_NE(plan->explain().find("  sm80: accepted\n"), std::string::npos) << plan->explain();
      EXPECT_NE(plan->explain().find(kernel), std::string::npos) << plan->explain();
    }
  }
}

// What explain says of `p` on `target`, or the message of a plan no engine serves (a build
// without an sm_80 image has no generic kernel for these parts): both list sm80's verdict.
std::string verdicts(const Problem& p, const Target& target) {
  auto plan = Plan::build(p, target);
  return plan.ok() ? plan->explain() : plan.status().message();
}

// Unpinned on the parts without sm90: sm80 serves every head dim with the part's tiles.
TEST(Sm80Plan, SharedMemoryLimitedPartsGetTheirOwnTiles) {
  const Problem bwd256 = Problem::backward(Shape{1, 8, 8, 1024, 1024, 256, 256}, DType::bf16);
  const Problem bwd128 = Problem::backward(Shape{1, 8, 8, 1024, 1024, 128, 128}, DType::bf16);
  for (int arch : {86, 89}) {
    SCOPED_TRACE("sm_" + std::to_string(arch));
    const Target target = Target::cuda_arch(arch);
    for (const auto& [p, tile] : {std::pair<const Problem&, std::string>{bwd256, "d256m32"},
                                  std::pair<const Problem&, std::string>{bwd128, "d128q1"}}) {
      const std::string want = built(p, target) ? "  sm80: accepted\n"
                                                : "  sm80: declined: kernel not built in the ci "
                                                  "kernel set (backward tile " +
                                                      tile + ", bf16, plain)\n";
      EXPECT_NE(verdicts(p, target).find(want), std::string::npos) << verdicts(p, target);
    }
  }
  // Jetson Orin (sm_87) has the A100's 163 KB: the A100's tiles.
  EXPECT_EQ(Target::cuda_arch(87).smem_per_block_optin, 163u * 1024);
  // A100: the d256 backward runs the one-Q/dO-buffer tile (144 KB), not d256's 208 KB.
  const std::string a100 = verdicts(bwd256, Target::cuda_arch(80));
  EXPECT_NE(a100.find(built(bwd256, Target::cuda_arch(80))
                          ? "plan: sm80_bwd_d256q1_bf16_plain: tile d256q1, 64 keys per CTA x "
                            "64-query visits, 8 warps, 1 Q/dO stages, 144 KB shared memory, "
                          : "(backward tile d256q1, bf16, plain)"),
            std::string::npos)
      << a100;
  // A device whose limit is below every tile: the smallest tile's need is the reason.
  Target tiny = Target::cuda_arch(86);
  tiny.smem_per_block_optin = 32 * 1024;
  EXPECT_NE(verdicts(Problem::forward(Shape{1, 8, 8, 1024, 1024, 128, 128}, DType::bf16), tiny)
                .find("  sm80: declined: tile d128 needs 64 KB of shared memory per block; the "
                      "device allows 32 KB\n"),
            std::string::npos);
}

// Each score-mod kind has its own kernel (the bias kernel carries no softcap code, the softcap
// kernel no bias code), named for it; a negative scale takes the bias kind. The bias kinds stage
// the bias tile in shared memory where the tile keeps its part class, so their kernels fit every
// part the plain one fits.
TEST(Sm80Plan, EachScoreModKindHasItsKernel) {
  struct Kind {
    std::string suffix;
    bool bias, softcap, negative_scale;
  };
  const Kind kinds[] = {{"plain", false, false, false},
                        {"bias", true, false, false},
                        {"bias", false, false, true},
                        {"softcap", false, true, false},
                        {"softcap_bias", true, true, false}};
  for (bool backward : {false, true}) {
    for (const Kind& k : kinds) {
      const Shape shape{2, 4, 4, 300, 300, 128, 128};
      Problem p =
          backward ? Problem::backward(shape, DType::bf16) : Problem::forward(shape, DType::bf16);
      if (k.bias) p.set_bias(1, 4);
      if (k.softcap) p.set_softcap(30.0);
      if (k.negative_scale) p.set_scale(-0.1);
      for (int arch : {80, 86, 90}) {
        const Target target = Target::cuda_arch(arch);
        SCOPED_TRACE(std::string(backward ? "backward " : "forward ") + k.suffix + " sm_" +
                     std::to_string(arch));
        EXPECT_EQ(score_mod(p), kernels::score_mod_for(k.softcap, k.bias, !k.negative_scale));
        auto plan = Plan::build(p, target, PlanOptions{"sm80"});
        if (!built(p, target)) {
          ASSERT_FALSE(plan.ok());
          EXPECT_NE(plan.status().message().find(", bf16, " + k.suffix + ")\n"), std::string::npos)
              << plan.status().message();
          continue;
        }
        ASSERT_TRUE(plan.ok()) << plan.status().message();
        const std::string tile = arch == 86 && backward ? "d128q1" : "d128";
        const std::string kernel = std::string("plan: sm80_") + (backward ? "bwd_" : "fwd_") +
                                   tile + "_bf16_" + k.suffix + ": tile " + tile + ", ";
        EXPECT_NE(plan->explain().find(kernel), std::string::npos) << plan->explain();
      }
    }
  }
}

TEST(Sm80Plan, ArchitecturePlansCannotExecute) {
  auto plan = Plan::build(Problem::forward(Shape{1, 2, 2, 64, 64, 128, 128}, DType::bf16),
                          Target::cuda_arch(90), PlanOptions{"sm80"});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->engine(), "sm80");
  const Status st = plan->execute(Arguments{}, nullptr, 0);
  EXPECT_EQ(st.code(), Code::not_supported);
}

}  // namespace
}  // namespace floe
