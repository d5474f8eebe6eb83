// The decode engine's planning, without a GPU: it is ranked first, takes decode-like forwards
// (s_q <= 16; dense, ragged or paged K/V; GQA; masks, sinks, softcap, stats) on sm_80 and
// sm_90, declines everything else with a reason naming the tensor or feature (after which
// another engine serves the problem), sizes its split partials from the envelope, and fixes its
// splits by split_tokens alone in the batch-invariant mode.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "case_folder.h"

#include "floe/floe.h"
#include "support/plan_verdicts.h"

namespace floe {
namespace {

using test::verdict_of;

Problem paged_decode(int64_t b, int64_t s_kv) {
  return Problem::forward(Shape{b, 32, 8, 1, s_kv, 128, 128}, DType::bf16)
      .set_paged_kv(16, b * s_kv / 16)
      .set_seq_len_kv()
      .set_causal(MaskAlign::bottom_right)
      .set_stats();
}

const WorkspaceChunk* chunk(const Plan& plan, const std::string& name) {
  for (const WorkspaceChunk& c : plan.workspace_chunks()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

TEST(DecodePlan, IsRankedFirst) {
  ASSERT_FALSE(engine_names().empty());
  EXPECT_EQ(engine_names().front(), "decode");
}

TEST(DecodePlan, ServesDecodeProblemsOnSm80AndSm90) {
  const Problem problems[] = {
      paged_decode(1, 32768),
      paged_decode(128, 16384),
      Problem::forward(Shape{4, 8, 8, 16, 500, 64, 64}, DType::f16)
          .set_seq_len_q()
          .set_seq_len_kv()
          .set_sink()
          .set_softcap(30.0)
          .set_window(100, 0, MaskAlign::bottom_right),
      Problem::forward(Shape{3, 8, 2, 4, 300, 128, 128}, DType::bf16)
          .set_ragged_q(20)
          .set_ragged_kv(900)
          .set_stats(),
  };
  for (int arch : {80, 90}) {
    for (const Problem& p : problems) {
      Result<Plan> plan = Plan::build(p, Target::cuda_arch(arch));
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      EXPECT_EQ(plan->engine(), "decode") << plan->explain();
      EXPECT_NE(plan->explain().find("max_splits"), std::string::npos) << plan->explain();
    }
  }
}

TEST(DecodePlan, DeclinesWithReasons) {
  struct Case {
    const char* name;
    Problem problem;
    const char* reason;  // a fragment of decode's verdict
  };
  Problem hnd_unaligned = Problem::forward(Shape{2, 4, 4, 1, 100, 64, 64}, DType::bf16);
  hnd_unaligned.set_strides(TensorId::k, {4 * 100 * 64, 100 * 64, 64, 1});
  hnd_unaligned.set_strides(TensorId::v, {4 * 100 * 64 * 2, 100 * 64 * 2, 2, 1});
  Problem k_strided_d = Problem::forward(Shape{1, 2, 2, 1, 64, 64, 64}, DType::bf16);
  k_strided_d.set_strides(TensorId::k, {2 * 64 * 128, 64 * 128, 128, 2});
  const Case cases[] = {
      {"prefill", Problem::forward(Shape{1, 4, 4, 17, 100, 128, 128}, DType::bf16),
       "s_q 17: not a decode problem"},
      {"backward", Problem::backward(Shape{1, 4, 4, 1, 100, 128, 128}, DType::bf16),
       "backward: decode serves the forward only"},
      {"d96", Problem::forward(Shape{1, 4, 4, 1, 100, 96, 96}, DType::bf16),
       "decode serves d_qk = d_v in {64, 128}"},
      {"d128/64", Problem::forward(Shape{1, 4, 4, 1, 100, 128, 64}, DType::bf16),
       "decode serves d_qk = d_v in {64, 128}"},
      {"bias", Problem::forward(Shape{1, 4, 4, 1, 100, 64, 64}, DType::bf16).set_bias(1, 4),
       "bias: decode serves no additive bias"},
      {"page 8",
       Problem::forward(Shape{2, 4, 4, 1, 64, 64, 64}, DType::bf16)
           .set_paged_kv(8, 16)
           .set_seq_len_kv(),
       "page_size 8: decode serves powers of two from 16 to 256"},
      {"page 48",
       Problem::forward(Shape{2, 4, 4, 1, 96, 64, 64}, DType::bf16)
           .set_paged_kv(48, 4)
           .set_seq_len_kv(),
       "page_size 48"},
      {"v rows not 16 bytes", hnd_unaligned, "tensor 'v' strides"},
      {"k strided head dim", k_strided_d, "tensor 'k' strides: decode needs a unit stride"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<Plan> plan = Plan::build(c.problem, Target::cuda_arch(90));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_NE(plan->engine(), "decode");
    const EngineVerdict* v = verdict_of(*plan, "decode");
    ASSERT_NE(v, nullptr);
    EXPECT_FALSE(v->accepted);
    EXPECT_NE(v->reason.find(c.reason), std::string::npos) << v->reason;
  }
  // A part with 48 KB a block: neither d128 nor d64 fits.
  Target tiny = Target::cuda_arch(86);
  tiny.smem_per_block_optin = 48 * 1024;
  Result<Plan> small = Plan::build(paged_decode(2, 1024), tiny);
  ASSERT_TRUE(small.ok());
  EXPECT_NE(verdict_of(*small, "decode")->reason.find("shared memory: decode's d128 kernel needs"),
            std::string::npos)
      << small->explain();
  // On the CPU it declines like every CUDA engine.
  Result<Plan> cpu = Plan::build(paged_decode(1, 1024), Target::cpu(1));
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(verdict_of(*cpu, "decode")->reason, "runs on CUDA devices only");
}

TEST(DecodePlan, SplitPartialsAreNamedChunksSizedFromTheEnvelope) {
  // B 1, 32k keys: 8 kv heads cannot fill 132 SMs; the plan splits.
  Result<Plan> plan = Plan::build(paged_decode(1, 32768), Target::cuda_arch(90));
  ASSERT_TRUE(plan.ok());
  const WorkspaceChunk* o = chunk(*plan, "decode_partial_o");
  const WorkspaceChunk* lse = chunk(*plan, "decode_partial_lse");
  ASSERT_NE(o, nullptr);
  ASSERT_NE(lse, nullptr);
  // [rows, h_q, s_q, d_v] and [rows, h_q, s_q] f32, the same row count (b * (the envelope's
  // splits + 1): the device lengths choose the splits), and the arrival counters, int32 per
  // (batch, kv head, row tile).
  ASSERT_EQ(o->bytes % (32 * 128 * 4), 0u);
  const size_t slots = o->bytes / (32 * 128 * 4);
  EXPECT_GT(slots, 8u);
  EXPECT_EQ(lse->bytes, slots * 32 * 4);
  const WorkspaceChunk* arrivals = chunk(*plan, "decode_arrivals");
  ASSERT_NE(arrivals, nullptr);
  EXPECT_EQ(arrivals->bytes, 8u * 4u);
  EXPECT_NE(plan->explain().find(std::to_string(slots - 1) + " CTAs a unit, " +
                                 std::to_string(slots) + " partial rows"),
            std::string::npos)
      << plan->explain();
  for (const WorkspaceChunk* c : {o, lse, arrivals}) {
    EXPECT_EQ(c->offset % kWorkspaceAlignment, 0u);
    EXPECT_GE(plan->workspace_bytes(), c->offset + c->bytes);
  }

  // B 128, 16k: the envelope takes one split a batch (1024 CTAs fill the GPU), but a skewed
  // length vector cuts batches: 2 partial rows a batch.
  Result<Plan> full = Plan::build(paged_decode(128, 16384), Target::cuda_arch(90));
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->engine(), "decode");
  const WorkspaceChunk* full_lse = chunk(*full, "decode_partial_lse");
  ASSERT_NE(full_lse, nullptr);
  EXPECT_EQ(full_lse->bytes, static_cast<size_t>(2 * 128 * 32 * 4));
  EXPECT_NE(full->explain().find("max_splits 1 at the envelope"), std::string::npos)
      << full->explain();
}

TEST(DecodePlan, SplitTokensFixesTheSplitsWhateverTheBatch) {
  for (int64_t b : {1, 7, 64}) {
    Problem p = paged_decode(b, 8192);
    p.set_split_tokens(1000);
    Result<Plan> plan = Plan::build(p, Target::cuda_arch(90));
    ASSERT_TRUE(plan.ok());
    EXPECT_NE(plan->explain().find("splits of 1000 keys (batch-invariant)"), std::string::npos);
    const WorkspaceChunk* lse = chunk(*plan, "decode_partial_lse");
    ASSERT_NE(lse, nullptr);
    EXPECT_EQ(lse->bytes, static_cast<size_t>(9 * b * 32 * 4));  // ceil(8192 / 1000) = 9 splits
    // One arrival counter per (batch, kv head, row tile), which the execute zeroes.
    const WorkspaceChunk* arrivals = chunk(*plan, "decode_arrivals");
    ASSERT_NE(arrivals, nullptr);
    EXPECT_EQ(arrivals->bytes, static_cast<size_t>(b * 8 * 4));
  }
  // One split: every sequence is written directly, no partials and no counters.
  Problem one = paged_decode(4, 8192);
  one.set_split_tokens(8192);
  Result<Plan> plan = Plan::build(one, Target::cuda_arch(90));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->workspace_bytes(), 0u);
  EXPECT_EQ(chunk(*plan, "decode_arrivals"), nullptr);
}

// d128's pipeline: three stages (2 CTAs an SM) for grids of few waves or of long CTAs, two (3 CTAs
// an SM) for grids of many short ones, and two where three do not fit (sm_86/sm_89: 99 KB a block).
TEST(DecodePlan, PipelineDepthFollowsTheGridAndThePart) {
  const auto stages_of = [](const Problem& p, const Target& t) {
    Result<Plan> plan = Plan::build(p, t);
    EXPECT_TRUE(plan.ok());
    EXPECT_EQ(plan->engine(), "decode") << plan->explain();
    const std::string e = plan->explain();
    return e.find("2 stages") != std::string::npos   ? 2
           : e.find("3 stages") != std::string::npos ? 3
                                                     : 0;
  };
  EXPECT_EQ(stages_of(paged_decode(64, 8192), Target::cuda_arch(90)), 3);  // 512 CTAs
  // 1024 CTAs of 256 tiles: long CTAs keep the deeper pipeline.
  EXPECT_EQ(stages_of(paged_decode(128, 16384), Target::cuda_arch(90)), 3);
  // 1024 CTAs of 8 tiles; split1024 B 64 S 8k: 4096 CTAs of 16 tiles.
  EXPECT_EQ(stages_of(paged_decode(128, 512), Target::cuda_arch(90)), 2);
  Problem invariant = paged_decode(64, 8192);
  invariant.set_split_tokens(1024);
  EXPECT_EQ(stages_of(invariant, Target::cuda_arch(90)), 2);
  EXPECT_EQ(stages_of(paged_decode(1, 32768), Target::cuda_arch(90)), 3);
  EXPECT_EQ(stages_of(paged_decode(2, 1024), Target::cuda_arch(86)), 2);
}

// The case format carries split_tokens both ways (DESIGN 4), so a reproducer keeps the mode.
TEST(DecodePlan, SplitTokensRoundTripsThroughACaseFolder) {
  Problem p = Problem::forward(Shape{2, 8, 2, 1, 300, 64, 64}, DType::bf16).set_seq_len_kv();
  p.set_split_tokens(96);
  const std::string dir =
      (std::filesystem::path(FLOE_BINARY_DIR) / "test_tmp" / "decode_split_tokens").string();
  std::filesystem::remove_all(dir);
  tool::ArrayMap in;
  tool::HostArray lens;
  lens.shape = {2};
  lens.data = {300, 7};
  in["seq_len_kv"] = lens;
  ASSERT_TRUE(tool::write_case(dir, p, in).ok());
  Result<tool::Case> c = tool::read_case_problem(dir);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->problem.split_tokens().has_value());
  EXPECT_EQ(*c->problem.split_tokens(), 96);
}

TEST(DecodePlan, SplitTokensIsValidated) {
  for (int64_t n : {int64_t{0}, int64_t{-5}, int64_t{1} << 40}) {
    Problem p = paged_decode(1, 1024);
    p.set_split_tokens(n);
    Result<Plan> plan = Plan::build(p, Target::cpu(1));
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), Code::invalid_problem);
    EXPECT_NE(plan.status().message().find("problem split_tokens: must lie in [1, 2^31 - 1]"),
              std::string::npos)
        << plan.status().message();
  }
}

}  // namespace
}  // namespace floe
