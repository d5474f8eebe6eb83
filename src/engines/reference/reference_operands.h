// How the reference engine reads a problem: every tensor through its declared dtype and
// strides, the actual lengths of each batch, the mask, and the logit of one (query, key) pair.
// Shared by the forward and backward passes so that both see bit-identical scores.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "common/dtype_convert.h"
#include "engines/facts.h"
#include "floe/arguments.h"
#include "kernels/band_mask.h"

namespace floe::detail::reference {

inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// max(a, b) that propagates NaN from either side (std::max and fmax drop it).
inline double nan_max(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return a < b ? b : a;
}

// One tensor as declared: a host pointer, a dtype and up to four element strides. Strides past
// the rank are zero so that callers may pass unused trailing indices as 0.
struct View {
  void* base = nullptr;
  DType dtype = DType::f32;
  int64_t stride[TensorDesc::kMaxRank] = {0, 0, 0, 0};

  View() = default;
  View(const Facts& f, const Arguments& args, TensorId id) : base(args.get(id)) {
    if (!f.has(id)) return;
    const TensorDesc& d = f.t(id);
    dtype = d.dtype;
    for (int i = 0; i < d.rank; ++i) stride[i] = d.strides[i];
  }

  int64_t offset(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const {
    return i0 * stride[0] + i1 * stride[1] + i2 * stride[2] + i3 * stride[3];
  }
  double load(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const {
    return load_as_float(base, offset(i0, i1, i2, i3), dtype);
  }
  // Rounds to float first, then to the dtype: the one rounding rule every output follows.
  void store(double value, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const {
    store_from_float(base, offset(i0, i1, i2, i3), dtype, static_cast<float>(value));
  }

  // Row (i0, i1, i2, 0..n-1) into out, as doubles.
  void load_row(int64_t i0, int64_t i1, int64_t i2, int64_t n, double* out) const {
    for (int64_t d = 0; d < n; ++d) out[d] = load(i0, i1, i2, d);
  }
  void store_row(int64_t i0, int64_t i1, int64_t i2, int64_t n, const double* in) const {
    for (int64_t d = 0; d < n; ++d) store(in[d], i0, i1, i2, d);
  }
  void zero_row(int64_t i0, int64_t i1, int64_t i2, int64_t n) const {
    for (int64_t d = 0; d < n; ++d) store(0.0, i0, i1, i2, d);
  }
  // a . row(i0, i1, i2, :), summed in order of d.
  double dot_row(const double* a, int64_t i0, int64_t i1, int64_t i2, int64_t n) const {
    double sum = 0;
    for (int64_t d = 0; d < n; ++d) sum += a[d] * load(i0, i1, i2, d);
    return sum;
  }
};

// The actual lengths of one batch and the offset of the band's diagonal.
struct Lengths {
  int64_t sq = 0, skv = 0, off = 0;
};

// The logit of one visible pair: s after softcap and bias, and ds/dx where x = scale * q.k.
struct Logit {
  double s = 0;
  double dcap = 1;
};

struct Operands {
  const Facts& f;
  View q, k, v, o, stats, bias, sink, d_o, dq, dk, dv, dbias, dsink;
  const int32_t* seq_len_q = nullptr;
  const int32_t* seq_len_kv = nullptr;
  kernels::BandMask band;

  Operands(const Facts& facts, const Arguments& a)
      : f(facts),
        q(facts, a, TensorId::q),
        k(facts, a, TensorId::k),
        v(facts, a, TensorId::v),
        o(facts, a, TensorId::o),
        stats(facts, a, TensorId::stats),
        bias(facts, a, TensorId::bias),
        sink(facts, a, TensorId::sink),
        d_o(facts, a, TensorId::d_o),
        dq(facts, a, TensorId::dq),
        dk(facts, a, TensorId::dk),
        dv(facts, a, TensorId::dv),
        dbias(facts, a, TensorId::dbias),
        dsink(facts, a, TensorId::dsink),
        band(kernels::BandMask::from(facts.mask)) {
    if (facts.has(TensorId::seq_len_q))
      seq_len_q = static_cast<const int32_t*>(a.get(TensorId::seq_len_q));
    if (facts.has(TensorId::seq_len_kv))
      seq_len_kv = static_cast<const int32_t*>(a.get(TensorId::seq_len_kv));
  }

  bool has_bias() const { return f.has(TensorId::bias); }
  bool has_sink() const { return f.has(TensorId::sink); }
  double sigma(int64_t h) const { return sink.load(h); }

  // The actual lengths of batch b and the band's offset for them.
  Lengths lengths(int64_t b) const {
    Lengths l;
    l.sq = length(seq_len_q, TensorId::seq_len_q, b, f.s_q);
    l.skv = length(seq_len_kv, TensorId::seq_len_kv, b, f.s_kv);
    l.off = band.offset(l.sq, l.skv);
    return l;
  }
  // Clamped to [0, full] so that a bad length cannot send a read out of bounds.
  int64_t length(const int32_t* lens, TensorId id, int64_t b, int64_t full) const {
    if (lens == nullptr) return full;
    return std::clamp<int64_t>(lens[b * f.t(id).strides[0]], 0, full);
  }
  // The visible keys of query i < l.sq: [*first, *last], empty when first > last.
  void key_range(const Lengths& l, int64_t i, int64_t* first, int64_t* last) const {
    *first = std::max<int64_t>(band.first_key(i, l.off), 0);
    *last = std::min<int64_t>(band.last_key(i, l.off), l.skv - 1);
  }
  bool visible(const Lengths& l, int64_t i, int64_t j) const {
    return i < l.sq && j < l.skv && band.visible(i, j, l.off);
  }

  // dot = q_i . k_j, however the caller summed it (always in order of d).
  Logit logit(double dot, int64_t b, int64_t h, int64_t i, int64_t j) const {
    const double x = f.scale * dot;
    Logit out{x, 1.0};
    if (f.has_softcap) {
      const double t = std::tanh(x / f.softcap);
      out.s = f.softcap * t;
      out.dcap = 1.0 - t * t;
    }
    if (has_bias()) {
      out.s += bias.load(f.bias_broadcast_b() ? 0 : b, f.bias_broadcast_h() ? 0 : h, i, j);
    }
    return out;
  }

  // exp(s - lse): a logit of -inf (a -inf bias) has probability 0 even when lse is -inf too.
  // An LSE of -inf is what the forward writes for a row with no weight, so the backward gives
  // every pair of such a row probability 0 (as if lse were +inf: a +inf logit still gives NaN),
  // which is what the GPU engines compute.
  static double prob(double s, double lse) {
    if (s == kNegInf) return 0.0;
    return std::exp(s - (lse == kNegInf ? -kNegInf : lse));
  }
};

}  // namespace floe::detail::reference
