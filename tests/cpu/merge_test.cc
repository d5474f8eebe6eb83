// The merge op on the CPU (the fp64 reference): validation and execute messages that name the
// tensor, the field and the rule; the merge against a direct computation of the definition in
// long double; rows whose parts have no visible key (-inf), NaN, in place, strided layouts, and
// the result of merging the two halves of an attention row equal to attention over all of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "floe/floe.h"

namespace floe {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::string build_error(const MergeProblem& p) {
  Result<MergePlan> plan = MergePlan::build(p, Target::cpu(1));
  if (plan.ok()) return "";
  EXPECT_EQ(plan.status().code(), Code::invalid_problem);
  return plan.status().message();
}

TEST(Merge, ValidationNamesTensorFieldAndRule) {
  EXPECT_EQ(build_error(MergeProblem::make(2, 3, 4, 8, DType::f32)), "");
  EXPECT_NE(build_error(MergeProblem::make(2, 3, 4, 0, DType::f32))
                .find("merge problem dims: b, h and s must be >= 0 and d >= 1"),
            std::string::npos);
  EXPECT_NE(build_error(MergeProblem::make(1, 1, 1, 8, DType::i32))
                .find("tensor 'o_a' dtype: i32; must be f32, f16 or bf16"),
            std::string::npos);
  EXPECT_NE(
      build_error(
          MergeProblem::make(1, 1, 1, 8, DType::f32).set_dtype(MergeTensor::lse_b, DType::f16))
          .find("tensor 'lse_b' dtype: f16; an lse is f32"),
      std::string::npos);
  EXPECT_NE(
      build_error(
          MergeProblem::make(1, 2, 2, 8, DType::f32).set_strides(MergeTensor::o_b, {32, 16, 8, -1}))
          .find("tensor 'o_b' strides[3]: -1; must be >= 0"),
      std::string::npos);
  EXPECT_NE(
      build_error(
          MergeProblem::make(1, 2, 2, 8, DType::f32).set_strides(MergeTensor::o, {32, 8, 8, 1}))
          .find("tensor 'o' strides: the output overlaps itself"),
      std::string::npos);
  EXPECT_NE(
      build_error(MergeProblem::make(1, 2, 2, 8, DType::f32).set_strides(MergeTensor::lse, {4, 2}))
          .find("tensor 'lse' strides: 2 given, the tensor has 3 dims"),
      std::string::npos);
  // Broadcast inputs are fine (a zero stride on o_a).
  EXPECT_EQ(
      build_error(
          MergeProblem::make(2, 2, 2, 8, DType::f32).set_strides(MergeTensor::o_a, {0, 16, 8, 1})),
      "");
}

struct Buffers {
  std::vector<float> oa, ob, o, la, lb, l;
  MergeArguments args() {
    return MergeArguments{}
        .set(MergeTensor::o_a, oa.data())
        .set(MergeTensor::o_b, ob.data())
        .set(MergeTensor::o, o.data())
        .set(MergeTensor::lse_a, la.data())
        .set(MergeTensor::lse_b, lb.data())
        .set(MergeTensor::lse, l.data());
  }
};

TEST(Merge, ExecuteRefusesBadPointersNamingThem) {
  const MergeProblem p = MergeProblem::make(1, 2, 3, 4, DType::f32);
  Result<MergePlan> plan = MergePlan::build(p, Target::cpu(1));
  ASSERT_TRUE(plan.ok());
  Buffers b{std::vector<float>(24), std::vector<float>(24), std::vector<float>(24),
            std::vector<float>(6),  std::vector<float>(6),  std::vector<float>(6)};
  MergeArguments a = b.args();
  a.set(MergeTensor::lse_b, nullptr);
  EXPECT_EQ(plan->execute(a).message(), "argument 'lse_b': null, the merge needs it");
  a = b.args();
  a.set(MergeTensor::o, reinterpret_cast<char*>(b.o.data()) + 2);
  EXPECT_EQ(plan->execute(a).message(), "argument 'o': must be aligned to its element (4 bytes)");
  a = b.args();
  a.set(MergeTensor::lse, b.lb.data() + 1);  // overlaps lse_b without replacing it
  const Status st = plan->execute(a);
  EXPECT_EQ(st.code(), Code::invalid_argument);
  EXPECT_NE(st.message().find("argument 'lse': its memory overlaps input 'lse_b'"),
            std::string::npos)
      << st.message();
  a = b.args();
  a.set(MergeTensor::o, b.la.data());  // o over an lse
  EXPECT_NE(plan->execute(a).message().find("argument 'o': its memory overlaps input 'lse_a'"),
            std::string::npos);
  // In place over part a, or over part b: fine.
  a = b.args();
  a.set(MergeTensor::o, b.oa.data()).set(MergeTensor::lse, b.la.data());
  EXPECT_TRUE(plan->execute(a).ok());
  a = b.args();
  a.set(MergeTensor::o, b.ob.data()).set(MergeTensor::lse, b.lb.data());
  EXPECT_TRUE(plan->execute(a).ok());
}

// The definition, in long double: lse = log(e^a + e^b), O = (e^a O_a + e^b O_b) / (e^a + e^b),
// parts at -inf left out, O = 0 when both are.
void direct(float la, float lb, const float* oa, const float* ob, int d, float* o, float* l) {
  const bool ua = la != -kInf, ub = lb != -kInf;
  if (std::isnan(la) || std::isnan(lb)) {
    for (int i = 0; i < d; ++i) o[i] = NAN;
    *l = NAN;
    return;
  }
  if (!ua && !ub) {
    for (int i = 0; i < d; ++i) o[i] = 0.f;
    *l = -kInf;
    return;
  }
  const long double m = std::max(ua ? la : lb, ub ? lb : la);
  const long double ea = ua ? std::exp(static_cast<long double>(la) - m) : 0;
  const long double eb = ub ? std::exp(static_cast<long double>(lb) - m) : 0;
  for (int i = 0; i < d; ++i) {
    o[i] = static_cast<float>(((ua ? ea * oa[i] : 0) + (ub ? eb * ob[i] : 0)) / (ea + eb));
  }
  *l = static_cast<float>(m + std::log(ea + eb));
}

TEST(Merge, ReferenceEqualsTheDefinitionIncludingInfAndNan) {
  const int64_t B = 2, H = 3, S = 5, D = 16;
  // o_b head-major with gaps ([B, S, H, D] storage plus padding), the rest packed; lse_b [H, B*S].
  MergeProblem p = MergeProblem::make(B, H, S, D, DType::f32);
  p.set_strides(MergeTensor::o_b, {S * H * (D + 4), D + 4, H * (D + 4), 1});
  p.set_strides(MergeTensor::lse_b, {S, B * S, 1});
  Result<MergePlan> plan = MergePlan::build(p, Target::cpu(1));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  std::mt19937 rng(5);
  std::normal_distribution<float> n;
  Buffers b{std::vector<float>(B * H * S * D), std::vector<float>(B * S * H * (D + 4), NAN),
            std::vector<float>(B * H * S * D), std::vector<float>(B * H * S),
            std::vector<float>(B * H * S),     std::vector<float>(B * H * S)};
  for (float& x : b.oa) x = n(rng);
  for (int64_t bb = 0; bb < B; ++bb) {
    for (int64_t s = 0; s < S; ++s) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t d = 0; d < D; ++d) b.ob[((bb * S + s) * H + h) * (D + 4) + d] = n(rng);
      }
    }
  }
  for (float& x : b.la) x = 30 * n(rng);
  for (float& x : b.lb) x = 30 * n(rng);
  // Row kinds: a at -inf (its O poisoned), b at -inf, both, a NaN.
  b.la[1] = -kInf;
  for (int64_t d = 0; d < D; ++d) b.oa[1 * D + d] = NAN;
  b.lb[0 * S + 2] = -kInf;  // row (0, 0, 2) in lse_b's [H, B*S] layout
  b.la[3] = -kInf;
  b.lb[0 * S + 3] = -kInf;
  b.la[4] = NAN;
  ASSERT_TRUE(plan->execute(b.args()).ok());
  int bad = 0;
  for (int64_t bb = 0; bb < B; ++bb) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t s = 0; s < S; ++s) {
        const int64_t row = (bb * H + h) * S + s;
        float want_o[D], want_l, ob_row[D];
        for (int64_t d = 0; d < D; ++d) ob_row[d] = b.ob[((bb * S + s) * H + h) * (D + 4) + d];
        direct(b.la[row], b.lb[h * B * S + bb * S + s], &b.oa[row * D], ob_row, D, want_o, &want_l);
        const float got_l = b.l[row];
        if (!(std::isnan(want_l) ? std::isnan(got_l)
                                 : (std::isinf(want_l) ? got_l == want_l
                                                       : std::fabs(got_l - want_l) <=
                                                             1e-6f * (1 + std::fabs(want_l))))) {
          ADD_FAILURE() << "lse row " << row << ": " << got_l << ", want " << want_l;
          ++bad;
        }
        for (int64_t d = 0; d < D; ++d) {
          const float g = b.o[row * D + d], w = want_o[d];
          if (!(std::isnan(w) ? std::isnan(g) : std::fabs(g - w) <= 1e-6f * (1 + std::fabs(w)))) {
            if (bad++ < 5)
              ADD_FAILURE() << "o row " << row << " d " << d << ": " << g << ", want " << w;
          }
        }
      }
    }
  }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(b.l[3], -kInf);
  EXPECT_EQ(b.o[3 * D], 0.f);
}

// Attention of one query over 40 keys equals the merge of attention over keys 0..16 and
// 17..39, each with its own lse; in place into part a, in bf16.
TEST(Merge, MergingTwoHalvesOfAttentionGivesTheWhole) {
  const int D = 8, N = 40, cut = 17;
  std::mt19937 rng(9);
  std::normal_distribution<double> n;
  std::vector<double> s(N), v(N * D);
  for (double& x : s) x = 3 * n(rng);
  for (double& x : v) x = n(rng);
  auto attend = [&](int lo, int hi, std::vector<double>& o) {
    double m = -INFINITY, sum = 0;
    for (int j = lo; j < hi; ++j) m = std::max(m, s[j]);
    o.assign(D, 0.0);
    for (int j = lo; j < hi; ++j) {
      const double w = std::exp(s[j] - m);
      sum += w;
      for (int d = 0; d < D; ++d) o[d] += w * v[j * D + d];
    }
    for (double& x : o) x /= sum;
    return m + std::log(sum);
  };
  std::vector<double> oa, ob, all;
  const double la = attend(0, cut, oa), lb = attend(cut, N, ob), l_all = attend(0, N, all);
  MergeProblem p = MergeProblem::make(1, 1, 1, D, DType::bf16);
  p.set_dtype(MergeTensor::o_b, DType::f32);
  Result<MergePlan> plan = MergePlan::build(p, Target::cpu(1));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  std::vector<uint16_t> oa16(D);
  std::vector<float> ob32(D);
  for (int d = 0; d < D; ++d) {
    const float f = static_cast<float>(oa[d]);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    oa16[d] = static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
    ob32[d] = static_cast<float>(ob[d]);
  }
  float lse_a = static_cast<float>(la), lse_b = static_cast<float>(lb);
  ASSERT_TRUE(plan->execute(MergeArguments{}
                                .set(MergeTensor::o_a, oa16.data())
                                .set(MergeTensor::lse_a, &lse_a)
                                .set(MergeTensor::o_b, ob32.data())
                                .set(MergeTensor::lse_b, &lse_b)
                                .set(MergeTensor::o, oa16.data())
                                .set(MergeTensor::lse, &lse_a))
                  .ok());
  EXPECT_NEAR(lse_a, l_all, 1e-5);
  for (int d = 0; d < D; ++d) {
    const uint32_t u = static_cast<uint32_t>(oa16[d]) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    EXPECT_NEAR(f, all[d], 1e-2 * (1 + std::fabs(all[d]))) << d;
  }
}

}  // namespace
}  // namespace floe
