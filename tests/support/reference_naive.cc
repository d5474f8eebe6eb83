#include "support/reference_naive.h"

#include <cmath>
#include <limits>

namespace floe::reftest {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A dense row-major matrix.
struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<double> a;
  Mat(int64_t r, int64_t c) : rows(r), cols(c), a(static_cast<size_t>(r * c), 0.0) {}
  double& operator()(int64_t i, int64_t j) { return a[static_cast<size_t>(i * cols + j)]; }
  double operator()(int64_t i, int64_t j) const { return a[static_cast<size_t>(i * cols + j)]; }
};

// The [rows, cols] slab of a logical 4-d array at (x, y): element (x, y, r, c).
Mat slab(const std::vector<double>& t, int64_t dim1, int64_t x, int64_t y, int64_t rows,
         int64_t cols) {
  Mat m(rows, cols);
  const size_t base = static_cast<size_t>(((x * dim1) + y) * rows * cols);
  for (size_t e = 0; e < m.a.size(); ++e) m.a[e] = t[base + e];
  return m;
}
void add_slab(std::vector<double>& t, int64_t dim1, int64_t x, int64_t y, const Mat& m) {
  const size_t base = static_cast<size_t>(((x * dim1) + y) * m.rows * m.cols);
  for (size_t e = 0; e < m.a.size(); ++e) t[base + e] += m.a[e];
}

// The pieces of one (b, h): the mask, x = scale * Q K^T, and the scores after cap and bias.
struct Head {
  Mat mask, x, s;
  Head(const Spec& sp) : mask(sp.s_q, sp.s_kv), x(sp.s_q, sp.s_kv), s(sp.s_q, sp.s_kv) {}
};

Head make_head(const Spec& sp, const Tensors& t, int64_t b, int64_t h) {
  Head hd(sp);
  const int64_t hk = h / (sp.h_q / sp.h_kv);
  const Mat q = slab(t.q, sp.h_q, b, h, sp.s_q, sp.d_qk);
  const Mat k = slab(t.k, sp.h_kv, b, hk, sp.s_kv, sp.d_qk);
  const int64_t sq = sp.seq_q.empty() ? sp.s_q : sp.seq_q[b];
  const int64_t skv = sp.seq_kv.empty() ? sp.s_kv : sp.seq_kv[b];
  const int64_t off = sp.bottom_right ? skv - sq : 0;
  // The bias index as written in DESIGN: broadcast dims are read at 0, i.e. index % size.
  Mat bias(sp.s_q, sp.s_kv);
  if (sp.has_bias()) bias = slab(t.bias, sp.bias_h, b % sp.bias_b, h % sp.bias_h, sp.s_q, sp.s_kv);
  for (int64_t i = 0; i < sp.s_q; ++i) {
    for (int64_t j = 0; j < sp.s_kv; ++j) {
      bool vis = i < sq && j < skv;
      if (sp.left) vis = vis && j >= i + off - *sp.left;
      if (sp.right) vis = vis && j <= i + off + *sp.right;
      hd.mask(i, j) = vis ? 1.0 : 0.0;
      double dot = 0;
      for (int64_t d = 0; d < sp.d_qk; ++d) dot += q(i, d) * k(j, d);
      hd.x(i, j) = sp.resolved_scale() * dot;
      const double capped =
          sp.softcap ? *sp.softcap * std::tanh(hd.x(i, j) / *sp.softcap) : hd.x(i, j);
      hd.s(i, j) = capped + bias(i, j);
    }
  }
  return hd;
}

// P = exp(s - lse) on visible entries, 0 elsewhere.
Mat probabilities(const Head& hd, const std::vector<double>& lse, size_t row0) {
  Mat p(hd.s.rows, hd.s.cols);
  for (int64_t i = 0; i < p.rows; ++i) {
    for (int64_t j = 0; j < p.cols; ++j) {
      if (hd.mask(i, j) != 0.0) p(i, j) = std::exp(hd.s(i, j) - lse[row0 + i]);
    }
  }
  return p;
}

}  // namespace

double Spec::resolved_scale() const {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(d_qk));
}

void size_tensors(const Spec& s, Tensors& t) {
  auto fit = [](std::vector<double>& v, int64_t n) { v.resize(static_cast<size_t>(n), 0.0); };
  fit(t.q, s.b * s.h_q * s.s_q * s.d_qk);
  fit(t.k, s.b * s.h_kv * s.s_kv * s.d_qk);
  fit(t.v, s.b * s.h_kv * s.s_kv * s.d_v);
  fit(t.o, s.b * s.h_q * s.s_q * s.d_v);
  fit(t.d_o, s.b * s.h_q * s.s_q * s.d_v);
  fit(t.lse, s.b * s.h_q * s.s_q);
  fit(t.dq, s.b * s.h_q * s.s_q * s.d_qk);
  fit(t.dk, s.b * s.h_kv * s.s_kv * s.d_qk);
  fit(t.dv, s.b * s.h_kv * s.s_kv * s.d_v);
  fit(t.bias, s.bias_b * s.bias_h * s.s_q * s.s_kv);
  fit(t.dbias, s.bias_b * s.bias_h * s.s_q * s.s_kv);
  fit(t.sink, s.sink ? s.h_q : 0);
  fit(t.dsink, s.sink ? s.h_q : 0);
}

void naive_forward(const Spec& sp, Tensors& t) {
  size_tensors(sp, t);
  for (int64_t b = 0; b < sp.b; ++b) {
    for (int64_t h = 0; h < sp.h_q; ++h) {
      const Head hd = make_head(sp, t, b, h);
      const size_t row0 = static_cast<size_t>((b * sp.h_q + h) * sp.s_q);
      // The log-sum-exp of each row, written as log(sum exp(s - max)) + max over the visible
      // entries and the sink.
      for (int64_t i = 0; i < sp.s_q; ++i) {
        std::vector<double> terms;
        for (int64_t j = 0; j < sp.s_kv; ++j) {
          if (hd.mask(i, j) != 0.0) terms.push_back(hd.s(i, j));
        }
        if (sp.sink) terms.push_back(t.sink[h]);
        double m = -kInf;
        for (double x : terms) m = std::fmax(m, x);
        double sum = 0;
        for (double x : terms) sum += std::exp(x - m);
        const bool padded = !sp.seq_q.empty() && i >= sp.seq_q[b];
        t.lse[row0 + i] = padded || terms.empty() ? -kInf : m + std::log(sum);
      }
      const Mat p = probabilities(hd, t.lse, row0);
      const Mat v = slab(t.v, sp.h_kv, b, h / (sp.h_q / sp.h_kv), sp.s_kv, sp.d_v);
      Mat o(sp.s_q, sp.d_v);
      for (int64_t i = 0; i < sp.s_q; ++i) {
        for (int64_t d = 0; d < sp.d_v; ++d) {
          for (int64_t j = 0; j < sp.s_kv; ++j) o(i, d) += p(i, j) * v(j, d);
        }
      }
      for (int64_t i = 0; i < sp.s_q; ++i) {
        for (int64_t d = 0; d < sp.d_v; ++d) t.o[(row0 + i) * sp.d_v + d] = o(i, d);
      }
    }
  }
}

void naive_backward(const Spec& sp, Tensors& t) {
  size_tensors(sp, t);
  for (auto* g : {&t.dq, &t.dk, &t.dv, &t.dbias, &t.dsink}) std::fill(g->begin(), g->end(), 0.0);
  const double scale = sp.resolved_scale();
  for (int64_t b = 0; b < sp.b; ++b) {
    for (int64_t h = 0; h < sp.h_q; ++h) {
      const int64_t hk = h / (sp.h_q / sp.h_kv);
      const Head hd = make_head(sp, t, b, h);
      const size_t row0 = static_cast<size_t>((b * sp.h_q + h) * sp.s_q);
      const Mat p = probabilities(hd, t.lse, row0);
      const Mat q = slab(t.q, sp.h_q, b, h, sp.s_q, sp.d_qk);
      const Mat k = slab(t.k, sp.h_kv, b, hk, sp.s_kv, sp.d_qk);
      const Mat v = slab(t.v, sp.h_kv, b, hk, sp.s_kv, sp.d_v);
      const Mat o = slab(t.o, sp.h_q, b, h, sp.s_q, sp.d_v);
      const Mat d_o = slab(t.d_o, sp.h_q, b, h, sp.s_q, sp.d_v);
      const int64_t sq = sp.seq_q.empty() ? sp.s_q : sp.seq_q[b];

      std::vector<double> delta(static_cast<size_t>(sp.s_q), 0.0);  // rowsum(dO * O)
      for (int64_t i = 0; i < sq; ++i) {
        for (int64_t d = 0; d < sp.d_v; ++d) delta[i] += d_o(i, d) * o(i, d);
      }
      // dS = P * (dO V^T - delta); dX = dS * d(cap)/dx.
      Mat ds(sp.s_q, sp.s_kv), dx(sp.s_q, sp.s_kv);
      for (int64_t i = 0; i < sp.s_q; ++i) {
        for (int64_t j = 0; j < sp.s_kv; ++j) {
          double dp = 0;
          for (int64_t d = 0; d < sp.d_v; ++d) dp += d_o(i, d) * v(j, d);
          ds(i, j) = p(i, j) * (dp - delta[i]);
          double dcap = 1.0;
          if (sp.softcap) {
            const double th = std::tanh(hd.x(i, j) / *sp.softcap);
            dcap = 1.0 - th * th;
          }
          dx(i, j) = ds(i, j) * dcap;
        }
      }
      Mat dq(sp.s_q, sp.d_qk), dk(sp.s_kv, sp.d_qk), dv(sp.s_kv, sp.d_v);
      for (int64_t i = 0; i < sp.s_q; ++i) {
        for (int64_t j = 0; j < sp.s_kv; ++j) {
          for (int64_t d = 0; d < sp.d_qk; ++d) {
            dq(i, d) += scale * dx(i, j) * k(j, d);
            dk(j, d) += scale * dx(i, j) * q(i, d);
          }
          for (int64_t d = 0; d < sp.d_v; ++d) dv(j, d) += p(i, j) * d_o(i, d);
        }
      }
      add_slab(t.dq, sp.h_q, b, h, dq);
      add_slab(t.dk, sp.h_kv, b, hk, dk);
      add_slab(t.dv, sp.h_kv, b, hk, dv);
      if (sp.has_bias()) add_slab(t.dbias, sp.bias_h, b % sp.bias_b, h % sp.bias_h, ds);
      if (sp.sink) {
        for (int64_t i = 0; i < sq; ++i) {
          t.dsink[h] -= std::exp(t.sink[h] - t.lse[row0 + i]) * delta[i];
        }
      }
    }
  }
}

double naive_loss(const Spec& s, const Tensors& in) {
  Tensors t = in;
  naive_forward(s, t);
  double loss = 0;
  for (size_t e = 0; e < t.o.size(); ++e) loss += t.d_o[e] * t.o[e];
  return loss;
}

}  // namespace floe::reftest
