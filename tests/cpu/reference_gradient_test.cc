// Gradients: the naive analytic backward against central finite differences of the naive
// forward's loss L = sum(dO * O), in fp64, for every element of every input (q, k, v, bias,
// sink); and the engine's backward against the naive analytic one on the same rounded inputs.
// Together with reference_naive_test this ties the engine to the definition of the gradient,
// not just to a second implementation of the same formulas.
#include <gtest/gtest.h>

#include <cmath>

#include "support/reference_harness.h"

namespace floe::reftest {
namespace {

struct GradCase {
  std::string name;
  Spec spec;
  DType dtype = DType::bf16;
};

void PrintTo(const GradCase& g, std::ostream* os) {
  *os << g.name;
}

Spec small(int64_t h_q = 2, int64_t h_kv = 2, int64_t s_q = 5, int64_t s_kv = 6) {
  Spec s;
  s.b = 2, s.h_q = h_q, s.h_kv = h_kv, s.s_q = s_q, s.s_kv = s_kv, s.d_qk = 4, s.d_v = 3;
  return s;
}

std::vector<GradCase> grad_cases() {
  std::vector<GradCase> v;
  v.push_back({"plain", small()});
  Spec cap = small();
  cap.softcap = 1.5;
  cap.scale = 0.8;
  v.push_back({"softcap", cap, DType::f16});
  for (auto [bb, bh] : {std::pair<int, int>{1, 1}, {2, 1}, {1, 4}, {2, 4}}) {
    Spec s = small(4, 2);
    s.bias_b = bb, s.bias_h = bh;
    v.push_back({"bias_" + std::to_string(bb) + "_" + std::to_string(bh), s});
  }
  Spec sink = small(4, 1);
  sink.sink = true;
  v.push_back({"sink_mqa", sink});
  Spec gqa = small(6, 2, 4, 7);
  gqa.left = 2, gqa.right = 0, gqa.bottom_right = true;
  v.push_back({"gqa_window_br", gqa});
  Spec masked = small(2, 1, 6, 5);
  masked.right = -2;  // rows 0, 1 see no key
  masked.sink = true;
  v.push_back({"sink_masked_rows", masked});
  Spec pad = small(4, 2);
  pad.seq_q = {3, 0};
  pad.seq_kv = {2, 6};
  pad.right = 0, pad.bottom_right = true;
  pad.sink = true;
  pad.bias_b = 2, pad.bias_h = 1;
  v.push_back({"padding_sink_bias", pad});
  Spec all = small(4, 2, 5, 7);
  all.seq_q = {5, 4};
  all.seq_kv = {7, 3};
  all.left = 3, all.right = 1, all.bottom_right = false;
  all.softcap = 2.0, all.sink = true, all.bias_b = 1, all.bias_h = 4;
  v.push_back({"everything", all, DType::f16});
  return v;
}

// max |a| over a vector, at least 1 so that tolerances do not vanish on all-zero gradients.
double scale_of(const std::vector<double>& a) {
  double m = 1.0;
  for (double x : a) m = std::fmax(m, std::fabs(x));
  return m;
}

class Gradient : public ::testing::TestWithParam<GradCase> {};

TEST_P(Gradient, NaiveAnalyticMatchesFiniteDifferences) {
  const GradCase& g = GetParam();
  Case c;
  c.name = g.name;
  c.spec = g.spec;
  c.dtype = g.dtype;
  c.seed = std::hash<std::string>{}(g.name);
  // The rounded inputs the engine would see; o and lse exact, so that the analytic backward is
  // the true gradient of L.
  Tensors t = run_engine(c, Direction::backward).in;
  naive_forward(c.spec, t);
  Tensors analytic = t;
  naive_backward(c.spec, analytic);

  const double h = 1e-5;
  struct Operand {
    const char* name;
    std::vector<double> Tensors::*value;
    std::vector<double> Tensors::*grad;
  };
  const Operand operands[] = {{"q", &Tensors::q, &Tensors::dq},
                              {"k", &Tensors::k, &Tensors::dk},
                              {"v", &Tensors::v, &Tensors::dv},
                              {"bias", &Tensors::bias, &Tensors::dbias},
                              {"sink", &Tensors::sink, &Tensors::dsink}};
  int checked = 0;
  for (const Operand& op : operands) {
    const std::vector<double>& grad = analytic.*op.grad;
    const double tol = 1e-6 * scale_of(grad);
    for (size_t e = 0; e < (t.*op.value).size(); ++e) {
      Tensors plus = t, minus = t;
      (plus.*op.value)[e] += h;
      (minus.*op.value)[e] -= h;
      const double fd = (naive_loss(c.spec, plus) - naive_loss(c.spec, minus)) / (2 * h);
      EXPECT_NEAR(grad[e], fd, tol) << g.name << ": d" << op.name << "[" << e << "]\n"
                                    << c.describe(Direction::backward);
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

TEST_P(Gradient, EngineMatchesNaiveAnalytic) {
  const GradCase& g = GetParam();
  Case c;
  c.name = g.name;
  c.spec = g.spec;
  c.dtype = g.dtype;
  c.seed = std::hash<std::string>{}(g.name) + 1;
  const EngineRun run = run_engine(c, Direction::backward);
  ASSERT_TRUE(run.status.ok()) << run.status.message();
  EXPECT_TRUE(run.damage.empty()) << run.damage.front();

  // Same rounded inputs, o and stats as given: one ulp.
  Tensors given = run.in;
  naive_backward(c.spec, given);
  EXPECT_EQ(compare_outputs(c, Direction::backward, run.out, given), "");

  // Against the exact gradient the only gap is o and stats rounded to their dtypes: a few
  // ulps of the dtype relative to the gradient's norm.
  Tensors exact = run.in;
  naive_forward(c.spec, exact);
  naive_backward(c.spec, exact);
  const double rel = c.dtype == DType::bf16 ? 0.03 : 0.004;
  auto norm_close = [&](const char* name, const std::vector<double>& got,
                        const std::vector<double>& want) {
    double diff = 0, ref = 0;
    for (size_t e = 0; e < want.size(); ++e) {
      diff += (got[e] - want[e]) * (got[e] - want[e]);
      ref += want[e] * want[e];
    }
    EXPECT_LE(std::sqrt(diff), rel * std::sqrt(ref) + 1e-6) << g.name << ": " << name;
  };
  norm_close("dq", run.out.dq, exact.dq);
  norm_close("dk", run.out.dk, exact.dk);
  norm_close("dv", run.out.dv, exact.dv);
  if (c.spec.has_bias()) norm_close("dbias", run.out.dbias, exact.dbias);
  if (c.spec.sink) norm_close("dsink", run.out.dsink, exact.dsink);
}

INSTANTIATE_TEST_SUITE_P(Reference, Gradient, ::testing::ValuesIn(grad_cases()),
                         [](const ::testing::TestParamInfo<GradCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace floe::reftest
