#include "support/harness_magnitudes.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "support/harness_runner.h"

namespace floe::test {

namespace {

const tool::HostArray* find(const tool::ArrayMap& m, const char* name) {
  const auto it = m.find(name);
  return it == m.end() ? nullptr : &it->second;
}

// 2-norm of row `row` (last dim `d`) of a logical array.
double row_norm(const tool::HostArray& a, int64_t row, int64_t d) {
  double s = 0;
  for (int64_t x = 0; x < d; ++x) {
    const double v = a.data[static_cast<size_t>(row * d + x)];
    s += v * v;
  }
  return std::sqrt(s);
}

}  // namespace

Result<tool::ArrayMap> cancellation_magnitudes(const tool::Case& c) {
  tool::ArrayMap out;
  const Problem& p = c.problem;
  if (p.direction() != Direction::backward) return out;
  const tool::HostArray *q = find(c.inputs, "q"), *k = find(c.inputs, "k"),
                        *v = find(c.inputs, "v"), *o = find(c.inputs, "o"),
                        *d_o = find(c.inputs, "do"), *stats = find(c.inputs, "stats");
  if (!q || !k || !v || !o || !d_o || !stats) {
    return Status(Code::internal, "cancellation_magnitudes: the case lacks a backward input");
  }
  const TensorDesc& qd = *p.tensor(TensorId::q);
  const TensorDesc& kd = *p.tensor(TensorId::k);
  const TensorDesc& vd = *p.tensor(TensorId::v);
  const int64_t B = qd.dims[0], Hq = qd.dims[1], Sq = qd.dims[2], Dqk = qd.dims[3];
  const int64_t Hkv = kd.dims[1], Skv = kd.dims[2], Dv = vd.dims[3];
  const int64_t group = Hq / Hkv;
  const double scale = std::fabs(p.scale() ? *p.scale() : 1.0 / std::sqrt(double(Dqk)));
  std::vector<int64_t> lq(B, Sq), lkv(B, Skv);
  if (const tool::HostArray* a = find(c.inputs, "seq_len_q")) {
    for (int64_t b = 0; b < B; ++b) lq[b] = static_cast<int64_t>(a->data[b]);
  }
  if (const tool::HostArray* a = find(c.inputs, "seq_len_kv")) {
    for (int64_t b = 0; b < B; ++b) lkv[b] = static_cast<int64_t>(a->data[b]);
  }

  // Per query row: valid, |dO_i|, |O_i|. Per key: |v_j|; per (b, kv head): max |v_j|.
  const int64_t rows = B * Hq * Sq;
  std::vector<char> valid(rows, 0);
  std::vector<double> ndo(rows, 0), no(rows, 0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      for (int64_t i = 0; i < lq[b]; ++i) {
        const int64_t r = (b * Hq + h) * Sq + i;
        if (!std::isfinite(stats->data[r])) continue;
        valid[r] = 1;
        ndo[r] = row_norm(*d_o, r, Dv);
        no[r] = row_norm(*o, r, Dv);
      }
    }
  }
  std::vector<double> nv(B * Hkv * Skv, 0), vmax(B * Hkv, 0);
  for (int64_t bg = 0; bg < B * Hkv; ++bg) {
    for (int64_t j = 0; j < lkv[bg / Hkv]; ++j) {
      nv[bg * Skv + j] = row_norm(*v, bg * Skv + j, Dv);
      vmax[bg] = std::max(vmax[bg], nv[bg * Skv + j]);
    }
  }

  // dq.
  {
    std::vector<double> kmax(B * Hkv * Dqk, 0);
    for (int64_t bg = 0; bg < B * Hkv; ++bg) {
      for (int64_t j = 0; j < lkv[bg / Hkv]; ++j) {
        for (int64_t d = 0; d < Dqk; ++d) {
          kmax[bg * Dqk + d] =
              std::max<double>(kmax[bg * Dqk + d], std::fabs(k->data[(bg * Skv + j) * Dqk + d]));
        }
      }
    }
    tool::HostArray m;
    m.shape = {B, Hq, Sq, Dqk};
    m.data.assign(static_cast<size_t>(rows * Dqk), 0.f);
    for (int64_t r = 0; r < rows; ++r) {
      if (!valid[r]) continue;
      const int64_t b = r / (Hq * Sq), h = (r / Sq) % Hq, bg = b * Hkv + h / group;
      const double w = scale * ndo[r] * (vmax[bg] + no[r]);
      for (int64_t d = 0; d < Dqk; ++d)
        m.data[r * Dqk + d] = static_cast<float>(w * kmax[bg * Dqk + d]);
    }
    out["dq"] = std::move(m);
  }

  // dk: the weighted column sums from the reference's dv with dO := w broadcast over d.
  {
    tool::Case wc = c;
    tool::HostArray& w = wc.inputs["do"];
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t bg = (r / (Hq * Sq)) * Hkv + ((r / Sq) % Hq) / group;
      const float wr = valid[r] ? static_cast<float>(ndo[r] * (vmax[bg] + no[r])) : 0.f;
      for (int64_t d = 0; d < Dv; ++d) w.data[r * Dv + d] = wr;
    }
    Result<tool::ArrayMap> ref = run_reference(wc);
    if (!ref) {
      return Status(ref.status().code(),
                    "cancellation_magnitudes: reference with weights: " + ref.status().message());
    }
    const tool::HostArray* mass = find(*ref, "dv");
    if (!mass) return Status(Code::internal, "cancellation_magnitudes: no dv");
    std::vector<double> qmax(B * Hkv * Dqk, 0);
    for (int64_t r = 0; r < rows; ++r) {
      if (!valid[r]) continue;
      const int64_t bg = (r / (Hq * Sq)) * Hkv + ((r / Sq) % Hq) / group;
      for (int64_t d = 0; d < Dqk; ++d) {
        qmax[bg * Dqk + d] = std::max<double>(qmax[bg * Dqk + d], std::fabs(q->data[r * Dqk + d]));
      }
    }
    tool::HostArray m;
    m.shape = {B, Hkv, Skv, Dqk};
    m.data.assign(static_cast<size_t>(B * Hkv * Skv * Dqk), 0.f);
    for (int64_t kr = 0; kr < B * Hkv * Skv; ++kr) {
      double col = 0;  // every column of this dv row holds the same sum; rounding aside
      for (int64_t d = 0; d < Dv; ++d)
        col = std::max<double>(col, std::fabs(mass->data[kr * Dv + d]));
      const int64_t bg = kr / Skv;
      for (int64_t d = 0; d < Dqk; ++d) {
        m.data[kr * Dqk + d] = static_cast<float>(scale * qmax[bg * Dqk + d] * col);
      }
    }
    out["dk"] = std::move(m);
  }

  // dbias, in its own (possibly broadcast) shape.
  if (p.has(TensorId::dbias)) {
    const TensorDesc& bd = *p.tensor(TensorId::dbias);
    const int64_t bb = bd.dims[0], bh = bd.dims[1];
    tool::HostArray m;
    m.shape = {bb, bh, Sq, Skv};
    m.data.assign(static_cast<size_t>(bb * bh * Sq * Skv), 0.f);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < Hq; ++h) {
        const int64_t bg = b * Hkv + h / group;
        const int64_t base = ((bb == 1 ? 0 : b) * bh + (bh == 1 ? 0 : h)) * Sq;
        for (int64_t i = 0; i < Sq; ++i) {
          const int64_t r = (b * Hq + h) * Sq + i;
          if (!valid[r]) continue;
          for (int64_t j = 0; j < lkv[b]; ++j) {
            m.data[(base + i) * Skv + j] += static_cast<float>(ndo[r] * (nv[bg * Skv + j] + no[r]));
          }
        }
      }
    }
    out["dbias"] = std::move(m);
  }
  return out;
}

}  // namespace floe::test
