#include "support/harness_compare.h"

#include "support/harness_magnitudes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <vector>

namespace floe::test {

namespace {

constexpr int kMaxDetailLines = 8;

std::string index_string(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    idx[i] = flat % shape[i];
    flat /= shape[i];
  }
  std::string s = "[";
  for (size_t i = 0; i < idx.size(); ++i) s += (i ? "," : "") + std::to_string(idx[i]);
  return s + "]";
}

void note(Comparison* r, const std::string& line) {
  ++r->failed;
  if (r->failed <= kMaxDetailLines) r->details += "  " + line + "\n";
}

// Largest 2-norm of the rows (last dim) of a logical array.
double max_row_norm(const tool::HostArray& a) {
  if (a.shape.empty() || a.data.empty()) return 0;
  const size_t d = static_cast<size_t>(a.shape.back());
  double best = 0;
  for (size_t r = 0; r + d <= a.data.size(); r += d) {
    double s = 0;
    for (size_t i = 0; i < d; ++i) s += static_cast<double>(a.data[r + i]) * a.data[r + i];
    best = std::max(best, std::sqrt(s));
  }
  return best;
}

double max_abs(const tool::HostArray& a) {
  double m = 0;
  for (float x : a.data) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

const tool::HostArray* find(const tool::ArrayMap& m, const char* name) {
  const auto it = m.find(name);
  return it == m.end() ? nullptr : &it->second;
}

// dsink's scale per head: sum over valid rows of exp(sink - LSE) * sum_d |dO O|.
std::vector<double> dsink_magnitudes(const tool::Case& c) {
  const tool::HostArray* sink = find(c.inputs, "sink");
  const tool::HostArray* stats = find(c.inputs, "stats");
  const tool::HostArray* o = find(c.inputs, "o");
  const tool::HostArray* d_o = find(c.inputs, "do");
  const tool::HostArray* lens = find(c.inputs, "seq_len_q");
  if (!sink || !stats || !o || !d_o || stats->shape.size() != 3) return {};
  const int64_t b = stats->shape[0], h = stats->shape[1], s = stats->shape[2];
  const int64_t dv = o->shape.back();
  std::vector<double> mag(static_cast<size_t>(h), 0.0);
  for (int64_t bi = 0; bi < b; ++bi) {
    const int64_t rows = lens ? static_cast<int64_t>(lens->data[bi]) : s;
    for (int64_t hi = 0; hi < h; ++hi) {
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t row = (bi * h + hi) * s + i;
        const double lse = stats->data[row];
        if (!std::isfinite(lse)) continue;
        double dot = 0;
        for (int64_t d = 0; d < dv; ++d)
          dot += std::fabs(double(o->data[row * dv + d]) * d_o->data[row * dv + d]);
        mag[hi] += std::exp(double(sink->data[hi]) - lse) * dot;
      }
    }
  }
  return mag;
}

void compare_one(const std::string& name, const tool::HostArray& got, const tool::HostArray& want,
                 const Tolerance& tol, const std::vector<double>& dsink_mag,
                 const tool::HostArray* magnitude, Comparison* r) {
  if (got.shape != want.shape || got.data.size() != want.data.size()) {
    note(r, name + ": shape differs from the reference's");
    return;
  }
  if (magnitude && magnitude->data.size() != want.data.size()) magnitude = nullptr;
  const bool rows = want.shape.size() == 4;  // o dq dk dv dbias: scaled by their row
  const size_t row_len = rows ? static_cast<size_t>(want.shape.back()) : 1;
  for (size_t start = 0; start < want.data.size(); start += row_len) {
    double row_scale = 0;
    if (rows) {
      for (size_t i = 0; i < row_len; ++i) {
        const double w = want.data[start + i];
        if (std::isfinite(w)) row_scale = std::max(row_scale, std::fabs(w));
      }
    } else if (name == "dsink" && start < dsink_mag.size()) {
      row_scale = dsink_mag[start];
    }
    for (size_t i = start; i < start + row_len; ++i) {
      ++r->checked;
      const double x = got.data[i], w = want.data[i];
      auto where = [&] {
        std::ostringstream o;
        o.precision(9);
        o << name << index_string(static_cast<int64_t>(i), want.shape) << ": got " << x
          << ", reference " << w;
        return o.str();
      };
      if (std::isnan(w)) {
        note(r, where() + " (the reference is NaN: a harness bug)");
      } else if (std::isnan(x)) {
        note(r, where() + " (NaN: computed, or never written and still poisoned)");
      } else if (std::isinf(w) || std::isinf(x)) {
        if (x != w) note(r, where() + " (infinities must match exactly)");
      } else {
        const double bound = tol.bound(w, row_scale, magnitude ? magnitude->data[i] : 0.0);
        const double err = std::fabs(x - w);
        r->worst = std::max(r->worst, bound > 0 ? err / bound : (err > 0 ? INFINITY : 0));
        if (!(err <= bound)) {
          std::ostringstream o;
          o.precision(3);
          o << " (|diff| " << err << " > tolerance " << bound << ")";
          note(r, where() + o.str());
        }
      }
    }
  }
}

}  // namespace

std::string Comparison::summary() const {
  std::ostringstream o;
  o.precision(3);
  if (ok()) {
    o << "ok: " << checked << " elements, worst " << worst << " of tolerance";
  } else if (checked == 0 && failed == 0) {
    o << "nothing compared";
  } else {
    o << failed << " of " << checked << " elements out of tolerance (worst " << worst
      << " of tolerance)\n"
      << details;
    if (failed > kMaxDetailLines) o << "  ... " << (failed - kMaxDetailLines) << " more\n";
  }
  return o.str();
}

ToleranceInputs tolerance_inputs(const tool::Case& c) {
  ToleranceInputs t;
  const Problem& p = c.problem;
  t.dtype = p.dtype();
  t.d_qk = p.tensor(TensorId::q)->dims[3];
  t.d_v = p.tensor(TensorId::v)->dims[3];
  const double scale = p.scale() ? *p.scale() : 1.0 / std::sqrt(static_cast<double>(t.d_qk));
  const tool::HostArray* q = find(c.inputs, "q");
  const tool::HostArray* k = find(c.inputs, "k");
  t.score_bound = std::fabs(scale) * (q ? max_row_norm(*q) : 0) * (k ? max_row_norm(*k) : 0);
  if (const tool::HostArray* bias = find(c.inputs, "bias")) t.bias_max = max_abs(*bias);
  t.softcap = p.softcap();
  return t;
}

Comparison compare_outputs(const tool::Case& c, const tool::ArrayMap& got,
                           const tool::ArrayMap& want) {
  Comparison r;
  const ToleranceInputs t = tolerance_inputs(c);
  const std::vector<double> mag =
      c.problem.has(TensorId::dsink) ? dsink_magnitudes(c) : std::vector<double>{};
  tool::ArrayMap cancellation;
  if (c.problem.direction() == Direction::backward) {
    Result<tool::ArrayMap> m = cancellation_magnitudes(c);
    if (!m) {
      note(&r, "tolerance magnitudes: " + m.status().message());
      return r;
    }
    cancellation = std::move(*m);
  }
  for (const std::string& name : tool::output_names(c.problem)) {
    const tool::HostArray* g = find(got, name.c_str());
    const tool::HostArray* w = find(want, name.c_str());
    if (!g || !w) {
      note(&r, name + ": missing from the " + (g ? "reference's" : "engine's") + " outputs");
      continue;
    }
    compare_one(name, *g, *w, tolerance_for(name, t), mag, find(cancellation, name.c_str()), &r);
  }
  return r;
}

Comparison compare_bitwise(const tool::ArrayMap& got, const tool::ArrayMap& want) {
  Comparison r;
  for (const auto& [name, w] : want) {
    const tool::HostArray* g = find(got, name.c_str());
    if (!g || g->shape != w.shape || g->data.size() != w.data.size()) {
      note(&r, name + ": missing or shaped differently");
      continue;
    }
    for (size_t i = 0; i < w.data.size(); ++i) {
      ++r.checked;
      uint32_t a, b;
      std::memcpy(&a, &g->data[i], 4);
      std::memcpy(&b, &w.data[i], 4);
      if (std::isnan(g->data[i]) || std::isnan(w.data[i]) || a != b) {
        std::ostringstream o;
        o.precision(9);
        o << name << index_string(static_cast<int64_t>(i), w.shape) << ": " << g->data[i] << " vs "
          << w.data[i] << (a == b ? " (NaN: unwritten)" : " (bits differ)");
        note(&r, o.str());
      }
    }
  }
  return r;
}

}  // namespace floe::test
