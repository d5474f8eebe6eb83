// Every invalid problem is refused at build with a message that names the tensor, the field
// and the rule. One row per rule; each row starts from a valid problem and breaks one thing.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "floe/floe.h"
#include "plan/validate.h"

namespace floe {
namespace {

Shape small() {
  return Shape{2, 8, 2, 16, 24, 32, 16};
}
Problem fwd() {
  return Problem::forward(small(), DType::bf16);
}
Problem bwd() {
  return Problem::backward(small(), DType::bf16);
}

struct Row {
  const char* name;
  std::function<Problem()> make;
  std::vector<std::string> culprit;  // every fragment must appear in the message
};

const std::vector<Row>& rows() {
  static const std::vector<Row> table = {
      {"q dtype f32",
       [] {
         auto p = fwd();
         auto d = *p.tensor(TensorId::q);
         d.dtype = DType::f32;
         return p.set_tensor(TensorId::q, d);
       },
       {"'q'", "dtype", "f16 or bf16"}},
      {"k dtype differs from q",
       [] {
         auto p = fwd();
         auto d = *p.tensor(TensorId::k);
         d.dtype = DType::f16;
         return p.set_tensor(TensorId::k, d);
       },
       {"'k'", "dtype", "must match q"}},
      {"v dtype differs",
       [] {
         auto p = bwd();
         auto d = *p.tensor(TensorId::v);
         d.dtype = DType::f16;
         return p.set_tensor(TensorId::v, d);
       },
       {"'v'", "dtype", "must match q"}},
      {"dq dtype differs",
       [] {
         auto p = bwd();
         auto d = *p.tensor(TensorId::dq);
         d.dtype = DType::f16;
         return p.set_tensor(TensorId::dq, d);
       },
       {"'dq'", "dtype", "must match q"}},
      {"stats dtype bf16",
       [] {
         auto p = fwd().set_stats();
         auto d = *p.tensor(TensorId::stats);
         d.dtype = DType::bf16;
         return p.set_tensor(TensorId::stats, d);
       },
       {"'stats'", "dtype", "must be f32"}},
      {"sink dtype bf16",
       [] {
         auto p = fwd().set_sink();
         auto d = *p.tensor(TensorId::sink);
         d.dtype = DType::bf16;
         return p.set_tensor(TensorId::sink, d);
       },
       {"'sink'", "dtype", "must be f32"}},
      {"seq_len_q dtype f32",
       [] {
         auto p = fwd().set_seq_len_q();
         auto d = *p.tensor(TensorId::seq_len_q);
         d.dtype = DType::f32;
         return p.set_tensor(TensorId::seq_len_q, d);
       },
       {"'seq_len_q'", "dtype", "must be i32"}},
      {"bias dtype differs",
       [] {
         auto p = fwd().set_bias(1, 8);
         auto d = *p.tensor(TensorId::bias);
         d.dtype = DType::f16;
         return p.set_tensor(TensorId::bias, d);
       },
       {"'bias'", "dtype", "must match q"}},
      {"b zero",
       [] {
         return Problem::forward(Shape{0, 8, 2, 16, 24, 32, 16}, DType::bf16);
       },
       {"'q'", "dims[0] (b)", "must be positive"}},
      {"s_kv negative",
       [] {
         return Problem::forward(Shape{2, 8, 2, 16, -3, 32, 16}, DType::bf16);
       },
       {"'k'", "dims[2] (s_kv)", "must be positive"}},
      {"d_v zero",
       [] {
         return Problem::forward(Shape{2, 8, 2, 16, 24, 32, 0}, DType::f16);
       },
       {"'v'", "dims[3] (d_v)", "must be positive"}},
      {"dim too large",
       [] {
         return Problem::forward(Shape{1, 1, 1, int64_t{1} << 32, 8, 8, 8}, DType::f16);
       },
       {"'q'", "dims[2] (s_q)", "below 2^31"}},
      {"h_q not a multiple of h_kv",
       [] {
         return Problem::forward(Shape{2, 8, 3, 16, 24, 32, 16}, DType::bf16);
       },
       {"'k'", "dims[1] (h_kv)", "multiple of h_kv"}},
      {"head dims disagree q/k",
       [] {
         auto p = fwd();
         return p.set_tensor(TensorId::k, TensorDesc::packed(DType::bf16, {2, 2, 24, 64}));
       },
       {"'k'", "dims[3] (d_qk)", "must equal q's d_qk (32)"}},
      {"head dims disagree v/o",
       [] {
         auto p = fwd();
         return p.set_tensor(TensorId::o, TensorDesc::packed(DType::bf16, {2, 8, 16, 32}));
       },
       {"'o'", "dims[3] (d_v)", "v's d_v (16)"}},
      {"batch disagrees",
       [] {
         auto p = fwd();
         return p.set_tensor(TensorId::v, TensorDesc::packed(DType::bf16, {3, 2, 24, 16}));
       },
       {"'v'", "dims[0] (b)", "q's b (2)"}},
      {"v heads differ from k",
       [] {
         auto p = fwd();
         return p.set_tensor(TensorId::v, TensorDesc::packed(DType::bf16, {2, 4, 24, 16}));
       },
       {"'v'", "dims[1] (h_kv)", "k's h_kv (2)"}},
      {"v length differs from k",
       [] {
         auto p = fwd();
         return p.set_tensor(TensorId::v, TensorDesc::packed(DType::bf16, {2, 2, 25, 16}));
       },
       {"'v'", "dims[2] (s_kv)", "k's s_kv (24)"}},
      {"do shape differs",
       [] {
         auto p = bwd();
         return p.set_tensor(TensorId::d_o, TensorDesc::packed(DType::bf16, {2, 8, 17, 16}));
       },
       {"'do'", "dims[2] (s_q)", "q's s_q (16)"}},
      {"dk shape differs",
       [] {
         auto p = bwd();
         return p.set_tensor(TensorId::dk, TensorDesc::packed(DType::bf16, {2, 8, 24, 32}));
       },
       {"'dk'", "dims[1] (h_kv)", "k's"}},
      {"stats rank",
       [] {
         auto p = bwd();
         return p.set_tensor(TensorId::stats, TensorDesc::packed(DType::f32, {2, 8, 16, 1}));
       },
       {"'stats'", "rank", "must be 3"}},
      {"stats shape",
       [] {
         auto p = bwd();
         return p.set_tensor(TensorId::stats, TensorDesc::packed(DType::f32, {2, 4, 16}));
       },
       {"'stats'", "dims[1] (h_q)", "q's h_q (8)"}},
      {"bias batch dim",
       [] { return fwd().set_bias(3, 8); },
       {"'bias'", "dims[0] (b)", "must be 1 or q's b (2)"}},
      {"bias head dim",
       [] { return fwd().set_bias(1, 2); },
       {"'bias'", "dims[1] (h_q)", "must be 1 or q's h_q (8)"}},
      {"bias length",
       [] {
         auto p = fwd();
         return p.set_tensor(TensorId::bias, TensorDesc::packed(DType::bf16, {1, 1, 16, 23}));
       },
       {"'bias'", "dims[3] (s_kv)", "k's s_kv (24)"}},
      {"dbias shape differs from bias",
       [] {
         auto p = bwd().set_bias(2, 1);
         return p.set_tensor(TensorId::dbias, TensorDesc::packed(DType::bf16, {2, 8, 16, 24}));
       },
       {"'dbias'", "dims[1]", "bias's"}},
      {"sink length",
       [] {
         auto p = fwd();
         return p.set_tensor(TensorId::sink, TensorDesc::packed(DType::f32, {4}));
       },
       {"'sink'", "dims[0] (h_q)", "q's h_q (8)"}},
      {"seq_len_kv length",
       [] {
         auto p = fwd();
         return p.set_tensor(TensorId::seq_len_kv, TensorDesc::packed(DType::i32, {3}));
       },
       {"'seq_len_kv'", "dims[0] (b)", "q's b (2)"}},
      {"seq_len_q rank",
       [] {
         auto p = fwd();
         return p.set_tensor(TensorId::seq_len_q, TensorDesc::packed(DType::i32, {2, 1}));
       },
       {"'seq_len_q'", "rank", "must be 1"}},
      {"output o overlaps itself",
       [] {
         return fwd().set_strides(TensorId::o, {2048, 256, 16, 2});
       },
       {"'o'", "strides", "overlaps itself"}},
      {"output dq zero stride",
       [] {
         return bwd().set_strides(TensorId::dq, {4096, 512, 0, 1});
       },
       {"'dq'", "strides", "overlaps itself"}},
      {"output stats overlaps",
       [] {
         return fwd().set_stats().set_strides(TensorId::stats, {16, 1, 1});
       },
       {"'stats'", "strides", "overlaps itself"}},
      {"output dk overlaps across heads",
       [] {
         return bwd().set_strides(TensorId::dk, {1536, 32, 32, 1});
       },
       {"'dk'", "strides", "overlaps itself"}},
      {"negative stride",
       [] {
         return fwd().set_strides(TensorId::k, {1536, 768, -32, 1});
       },
       {"'k'", "strides[2]", "must not be negative"}},
      {"strides of undeclared tensor",
       [] {
         return fwd().set_strides(TensorId::bias, {1, 1, 1, 1});
       },
       {"'bias'", "strides", "does not declare"}},
      {"strides of wrong rank",
       [] {
         return fwd().set_strides(TensorId::q, {1, 1, 1});
       },
       {"'q'", "strides", "rank 4"}},
      {"softcap zero", [] { return fwd().set_softcap(0.0); }, {"softcap", "finite and positive"}},
      {"softcap negative",
       [] { return fwd().set_softcap(-5.0); },
       {"softcap", "finite and positive"}},
      {"softcap nan",
       [] { return fwd().set_softcap(std::nan("")); },
       {"softcap", "finite and positive"}},
      {"scale infinite",
       [] { return fwd().set_scale(1.0 / 0.0); },
       {"scale", "finite and non-zero"}},
      {"scale zero", [] { return fwd().set_scale(0.0); }, {"scale", "finite and non-zero"}},
      {"mask bound out of range",
       [] { return fwd().set_window(int64_t{1} << 40, 0); },
       {"mask left", "2^31"}},
      {"backward tensor in forward",
       [] {
         auto p = fwd();
         return p.set_tensor(TensorId::dq, *p.tensor(TensorId::q));
       },
       {"'dq'", "forward problem", "backward only"}},
      {"do described empty",
       [] { return bwd().set_tensor(TensorId::d_o, TensorDesc{}); },
       {"'do'", "rank"}},
      {"dsink without sink",
       [] {
         auto p = bwd();
         return p.set_tensor(TensorId::dsink, TensorDesc::packed(DType::f32, {8}));
       },
       {"'dsink'", "without a sink"}},
      {"dbias without bias",
       [] {
         auto p = bwd();
         return p.set_tensor(TensorId::dbias, TensorDesc::packed(DType::bf16, {1, 1, 16, 24}));
       },
       {"'dbias'", "without a bias"}},
      // 64-bit sizes (issue 11 item 3): every dim below 2^31, their product not.
      {"element count overflows 64 bits",
       [] {
         const int64_t m = (int64_t{1} << 31) - 1;
         return Problem::backward(Shape{m, m, m, m, m, m, m}, DType::bf16);
       },
       {"'q'", "dims", "element count overflows 64 bits"}},
      {"span of an INT64_MAX stride",
       [] {
         return fwd().set_strides(TensorId::k, {INT64_MAX, 1, 32, 1});
       },
       {"'k'", "strides", "span", "overflows 64 bits"}},
      {"span fits int64 elements but not bytes",
       [] {
         return fwd().set_strides(TensorId::v, {int64_t{1} << 62, 16 * 24, 16, 1});
       },
       {"'v'", "strides", "span", "overflows 64 bits"}},
      // Ragged and paged problems (DESIGN 2.1, 2.2).
      {"ragged q total zero",
       [] { return fwd().set_ragged_q(0); },
       {"'q'", "dims[0] (total_q)", "must be positive"}},
      {"ragged q of another total",
       [] {
         auto p = fwd().set_ragged_q(40);
         return p.set_tensor(TensorId::q, TensorDesc::packed(DType::bf16, {41, 8, 32}));
       },
       {"'q'", "dims[0] (total_q) = 41", "ragged_q's total (40)"}},
      {"ragged q given rank 4",
       [] {
         auto p = fwd().set_ragged_q(40);
         return p.set_tensor(TensorId::q, TensorDesc::packed(DType::bf16, {2, 8, 16, 32}));
       },
       {"'q'", "rank", "must be 3"}},
      {"ragged stats of another head count",
       [] {
         auto p = fwd().set_ragged_q(40).set_stats();
         return p.set_tensor(TensorId::stats, TensorDesc::packed(DType::f32, {40, 4}));
       },
       {"'stats'", "dims[1] (h_q) = 4", "h_q (8)"}},
      {"offsets f32",
       [] { return fwd().set_ragged_kv(50, DType::f32); },
       {"'offsets_kv'", "dtype", "i32 or i64"}},
      {"offsets of b entries",
       [] {
         auto p = fwd().set_ragged_q(40);
         return p.set_tensor(TensorId::offsets_q, TensorDesc::packed(DType::i32, {2}));
       },
       {"'offsets_q'", "dims[0] (b + 1) = 2", "b + 1 (3)"}},
      {"offsets without a ragged side",
       [] { return fwd().set_tensor(TensorId::offsets_q, TensorDesc::packed(DType::i32, {3})); },
       {"'offsets_q'", "declared", "no ragged query side"}},
      {"ragged envelope s_q zero",
       [] {
         return Problem::forward(Shape{2, 8, 2, 0, 24, 32, 16}, DType::bf16).set_ragged_q(40);
       },
       {"problem s_q (envelope) = 0", "[1, 2^31)"}},
      {"paged backward", [] { return bwd().set_paged_kv(8, 10); }, {"paged_kv", "forward only"}},
      {"paged with ragged kv",
       [] { return fwd().set_ragged_kv(50).set_paged_kv(8, 10); },
       {"paged_kv", "excludes ragged_kv"}},
      {"paged without seq_len_kv",
       [] { return fwd().set_paged_kv(8, 10).set_seq_len_kv(false); },
       {"'seq_len_kv'", "missing", "paged"}},
      {"paged page size zero",
       [] { return fwd().set_paged_kv(0, 10, 3); },
       {"'k'", "dims[1] (page_size) = 0", "must be positive"}},
      {"paged table too narrow for s_kv",
       [] {
         return fwd().set_paged_kv(8, 10, 2);  // 2 x 8 < s_kv = 24
       },
       {"'block_table'", "dims[1] (max_pages) = 2", "must cover s_kv (24)"}},
      {"paged table i64",
       [] {
         auto p = fwd().set_paged_kv(8, 10);
         return p.set_tensor(TensorId::block_table, TensorDesc::packed(DType::i64, {2, 3}));
       },
       {"'block_table'", "dtype", "must be i32"}},
      {"paged v of another page size",
       [] {
         auto p = fwd().set_paged_kv(8, 10);
         return p.set_tensor(TensorId::v, TensorDesc::packed(DType::bf16, {10, 4, 2, 16}));
       },
       {"'v'", "dims[1] (page_size) = 4", "paged_kv's page_size (8)"}},
      {"block table without pages",
       [] {
         return fwd().set_tensor(TensorId::block_table, TensorDesc::packed(DType::i32, {2, 3}));
       },
       {"'block_table'", "declared", "no paged KV cache"}},
      {"ragged output overlaps itself",
       [] {
         return fwd().set_ragged_q(40).set_strides(TensorId::o, {8, 16, 1});
       },
       {"'o'", "strides", "overlaps itself"}},
      {"output aliasing modulo 2^64",
       [] {
         // o has b = 2 in a [4, ...] view: offsets 0 and 2^62 elements are 2^63 bytes apart,
         // and a 4th batch would land on byte 2^64 = 0. The reach and span must not wrap.
         auto p = Problem::forward(Shape{4, 8, 2, 16, 24, 32, 16}, DType::bf16);
         return p.set_strides(TensorId::o, {int64_t{1} << 62, 16 * 16, 16, 1});
       },
       {"'o'", "strides"}},
  };
  return table;
}

TEST(Validation, TableHasAtLeast25Rules) {
  EXPECT_GE(rows().size(), 25u);
}

TEST(Validation, BaselinesAreValid) {
  EXPECT_TRUE(detail::validate(fwd()).empty());
  EXPECT_TRUE(detail::validate(bwd()).empty());
  auto full = bwd()
                  .set_bias(1, 8)
                  .set_sink()
                  .set_seq_len_q()
                  .set_seq_len_kv()
                  .set_softcap(30)
                  .set_window(4, 0, MaskAlign::bottom_right)
                  .set_deterministic();
  EXPECT_TRUE(detail::validate(full).empty());
  // Ragged both sides with i64 offsets and FlashAttention's [Hq, Tq] stats; paged decode.
  auto ragged = bwd()
                    .set_ragged_q(40, DType::i64)
                    .set_ragged_kv(50)
                    .set_seq_len_q()
                    .set_bias(2, 1)
                    .set_sink()
                    .set_causal(MaskAlign::bottom_right)
                    .set_strides(TensorId::stats, {1, 40});
  EXPECT_TRUE(detail::validate(ragged).empty()) << detail::validate(ragged).front();
  // HND pages ([Npages, Hkv, P, D] in memory) are a stride permutation.
  auto paged_ok = fwd().set_ragged_q(40).set_paged_kv(8, 10).set_stats().set_strides(
      TensorId::k, {2 * 8 * 32, 32, 8 * 32, 1});
  EXPECT_TRUE(detail::validate(paged_ok).empty()) << detail::validate(paged_ok).front();
  EXPECT_EQ(paged_ok.tensor(TensorId::block_table)->dims[1], 3);  // ceil(24 / 8)
}

TEST(Validation, EveryRowIsRefusedAndNamesTheCulprit) {
  for (const Row& row : rows()) {
    SCOPED_TRACE(row.name);
    const Problem p = row.make();
    auto plan = Plan::build(p, Target::cpu(1));
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), Code::invalid_problem);
    for (const std::string& fragment : row.culprit) {
      EXPECT_NE(plan.status().message().find(fragment), std::string::npos)
          << "message: " << plan.status().message() << "\nmissing: " << fragment;
    }
    // The same refusal for a GPU target planned without a device.
    auto gpu = Plan::build(p, Target::cuda_arch(90));
    EXPECT_FALSE(gpu.ok());
  }
}

TEST(Validation, NonOverlapRule) {
  using detail::is_non_overlapping;
  EXPECT_TRUE(is_non_overlapping(TensorDesc::packed(DType::bf16, {2, 3, 4, 5})));
  // BSHD and gaps are fine.
  EXPECT_TRUE(is_non_overlapping(TensorDesc::strided(DType::bf16, {2, 3, 4, 5}, {120, 5, 15, 1})));
  EXPECT_TRUE(is_non_overlapping(TensorDesc::strided(DType::bf16, {2, 3, 4, 5}, {999, 7, 300, 1})));
  // Size-1 dims may have any stride, even 0.
  EXPECT_TRUE(is_non_overlapping(TensorDesc::strided(DType::bf16, {1, 3, 1, 5}, {0, 5, 0, 1})));
  EXPECT_FALSE(is_non_overlapping(TensorDesc::strided(DType::bf16, {2, 3, 4, 5}, {60, 20, 5, 0})));
  EXPECT_FALSE(is_non_overlapping(TensorDesc::strided(DType::bf16, {2, 3, 4, 5}, {60, 20, 4, 1})));
  // A reach that wraps modulo 2^64 is not "past everything": index 4 of dim 0 would alias 0.
  EXPECT_FALSE(is_non_overlapping(TensorDesc::strided(DType::bf16, {5, 2}, {int64_t{1} << 62, 1})));
  EXPECT_FALSE(is_non_overlapping(TensorDesc::strided(DType::bf16, {2, 3}, {1, int64_t{1} << 62})));
}

// numel, span and span_bytes saturate instead of wrapping (issue 11 item 3: span_bytes() was 62
// for a stride of INT64_MAX).
TEST(Validation, SizesSaturateInsteadOfWrapping) {
  const TensorDesc wide = TensorDesc::strided(DType::bf16, {2, 4}, {INT64_MAX, 1});
  EXPECT_EQ(wide.span(), TensorDesc::kSizeOverflow);
  EXPECT_EQ(wide.span_bytes(), SIZE_MAX);
  const int64_t m = (int64_t{1} << 31) - 1;
  EXPECT_EQ(TensorDesc::packed(DType::bf16, {m, m, m, m}).numel(), TensorDesc::kSizeOverflow);
  // Fits in elements, not in bytes.
  const TensorDesc bytes = TensorDesc::strided(DType::f32, {2}, {int64_t{1} << 62});
  EXPECT_EQ(bytes.span(), (int64_t{1} << 62) + 1);
  EXPECT_EQ(bytes.span_bytes(), SIZE_MAX);
  // And the ordinary case is unchanged.
  const TensorDesc ok = TensorDesc::strided(DType::bf16, {2, 3, 4, 5}, {999, 7, 300, 1});
  EXPECT_EQ(ok.numel(), 120);
  EXPECT_EQ(ok.span(), 999 + 14 + 900 + 4 + 1);
  EXPECT_EQ(ok.span_bytes(), 2u * (999 + 14 + 900 + 4 + 1));
}

// A valid problem whose workspace would not fit 64 bits is refused at build, naming the
// workspace; the backward used to wrap to a small size.
TEST(Validation, WorkspaceThatOverflowsIsRefused) {
  // B * Hq * Sq = 2^60 rows with d = 1: every tensor fits, but the reference engine's fp64
  // Delta needs 2^63 bytes.
  const int64_t n = int64_t{1} << 20;
  const Problem p = Problem::backward(Shape{n, n, n, n, 1, 1, 1}, DType::bf16);
  ASSERT_TRUE(detail::validate(p).empty()) << detail::validate(p).front();
  auto plan = Plan::build(p, Target::cpu(1));
  ASSERT_FALSE(plan.ok()) << "workspace_bytes() = " << plan->workspace_bytes();
  EXPECT_EQ(plan.status().code(), Code::invalid_problem);
  EXPECT_NE(plan.status().message().find("workspace"), std::string::npos)
      << plan.status().message();
  EXPECT_NE(plan.status().message().find("overflow"), std::string::npos) << plan.status().message();
}

}  // namespace
}  // namespace floe
