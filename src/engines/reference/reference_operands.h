// How the reference engine reads a problem: every tensor through its declared dtype and
// strides, the actual lengths of each batch, the mask, and the logit of one (query, key) pair.
// Shared by the forward and backward passes so that both see bit-identical scores.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "common/dtype_convert.h"
#include "engines/facts.h"
#include "engines/serving_sides.h"
#include "floe/arguments.h"
#include "kernels/band_mask.h"
#include "kernels/ragged_rows.h"

namespace floe::detail::reference {

inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// max(a, b) that propagates NaN from either side (std::max and fmax drop it).
inline double nan_max(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return a < b ? b : a;
}

// How a tensor's sequence rows are addressed: dense [B, H, S, ...], ragged [T, H, ...] (row i
// of batch b is token start_b + i) or paged [Npages, P, H, ...].
enum class Rows : uint8_t { dense, ragged, paged };

// One tensor as declared: a host pointer, a dtype and up to four element strides. Strides past
// the rank are zero so that callers may pass unused trailing indices as 0. Every tensor is
// indexed in the dense logical order (b, h, i, d) whatever its layout; a ragged or paged one
// maps (b, i) to its row.
struct View {
  void* base = nullptr;
  DType dtype = DType::f32;
  int64_t stride[TensorDesc::kMaxRank] = {0, 0, 0, 0};
  Rows rows = Rows::dense;
  const kernels::RaggedSide* ragged = nullptr;
  const kernels::PagedSide* paged = nullptr;

  View() = default;
  View(const Facts& f, const Arguments& args, TensorId id) : base(args.get(id)) {
    if (!f.has(id)) return;
    const TensorDesc& d = f.t(id);
    dtype = d.dtype;
    for (int i = 0; i < d.rank; ++i) stride[i] = d.strides[i];
  }
  View(const Facts& f, const Arguments& args, TensorId id, const kernels::RaggedSide* side)
      : View(f, args, id) {
    if (side) {
      rows = Rows::ragged;
      ragged = side;
    }
  }
  View(const Facts& f, const Arguments& args, TensorId id, const kernels::PagedSide* side)
      : View(f, args, id) {
    if (side) {
      rows = Rows::paged;
      paged = side;
    }
  }

  int64_t offset(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const {
    switch (rows) {
      case Rows::ragged:  // (b, h, i, d) -> [start_b + i, h, d]
        return (ragged->start(i0) + i2) * stride[0] + i1 * stride[1] + i3 * stride[2];
      case Rows::paged:  // (b, h, j, d) -> [page, j % P, h, d]
        return paged->page(i0, i2) * stride[0] + (i2 % paged->page_size) * stride[1] +
               i1 * stride[2] + i3 * stride[3];
      case Rows::dense:
        break;
    }
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

// The reading of one ragged side (null when the side is dense).
inline std::optional<kernels::RaggedSide> ragged_side(const Facts& f, const Arguments& a,
                                                      bool query) {
  if (!(query ? f.ragged_q : f.ragged_kv)) return std::nullopt;
  kernels::RaggedSide side = detail::ragged_side(f, query);
  side.offsets = a.get(query ? TensorId::offsets_q : TensorId::offsets_kv);
  const TensorId seq_len = query ? TensorId::seq_len_q : TensorId::seq_len_kv;
  if (f.has(seq_len)) side.seq_len = static_cast<const int32_t*>(a.get(seq_len));
  return side;
}

inline std::optional<kernels::PagedSide> paged_side(const Facts& f, const Arguments& a) {
  if (!f.paged_kv) return std::nullopt;
  kernels::PagedSide side = detail::paged_side(f);
  side.table = static_cast<const int32_t*>(a.get(TensorId::block_table));
  return side;
}

struct Operands {
  const Facts& f;
  // Declared before the views, which point at them.
  std::optional<kernels::RaggedSide> rq, rkv;
  std::optional<kernels::PagedSide> pkv;
  View q, k, v, o, stats, bias, sink, d_o, dq, dk, dv, dbias, dsink;
  const int32_t* seq_len_q = nullptr;
  const int32_t* seq_len_kv = nullptr;
  kernels::BandMask band;

  Operands(const Facts& facts, const Arguments& a)
      : f(facts),
        rq(ragged_side(facts, a, /*query=*/true)),
        rkv(ragged_side(facts, a, /*query=*/false)),
        pkv(paged_side(facts, a)),
        q(facts, a, TensorId::q, q_side()),
        k(kv_view(facts, a, TensorId::k)),
        v(kv_view(facts, a, TensorId::v)),
        o(facts, a, TensorId::o, q_side()),
        stats(facts, a, TensorId::stats, q_side()),
        bias(facts, a, TensorId::bias),
        sink(facts, a, TensorId::sink),
        d_o(facts, a, TensorId::d_o, q_side()),
        dq(facts, a, TensorId::dq, q_side()),
        dk(kv_view(facts, a, TensorId::dk)),
        dv(kv_view(facts, a, TensorId::dv)),
        dbias(facts, a, TensorId::dbias),
        dsink(facts, a, TensorId::dsink),
        band(kernels::BandMask::from(facts.mask)) {
    if (facts.has(TensorId::seq_len_q))
      seq_len_q = static_cast<const int32_t*>(a.get(TensorId::seq_len_q));
    if (facts.has(TensorId::seq_len_kv))
      seq_len_kv = static_cast<const int32_t*>(a.get(TensorId::seq_len_kv));
  }
  Operands(const Operands&) = delete;  // the views point into this object

  const kernels::RaggedSide* q_side() const { return rq ? &*rq : nullptr; }
  View kv_view(const Facts& facts, const Arguments& a, TensorId id) const {
    if (pkv) return View(facts, a, id, &*pkv);
    return View(facts, a, id, rkv ? &*rkv : nullptr);
  }

  // Query-side work items: one per (token, head) of a ragged side, else per (b, h, i) of the
  // envelope. Item -> (b, h, i); false for a token outside every batch's slot (never written).
  int64_t q_items() const { return rq ? f.total_q * f.h_q : f.b * f.h_q * f.s_q; }
  bool q_item(int64_t item, int64_t* b, int64_t* h, int64_t* i) const {
    return item_of(rq ? &*rq : nullptr, f.h_q, f.s_q, item, b, h, i);
  }
  // The same for key rows, per key/value head: only ragged and dense key sides have them (a
  // paged backward is not defined).
  int64_t kv_items() const { return rkv ? f.total_kv * f.h_kv : f.b * f.h_kv * f.s_kv; }
  bool kv_item(int64_t item, int64_t* b, int64_t* h, int64_t* j) const {
    return item_of(rkv ? &*rkv : nullptr, f.h_kv, f.s_kv, item, b, h, j);
  }
  // The item of query row (b, h, i) (i below the batch's length), for per-row scratch.
  int64_t q_item_index(int64_t b, int64_t h, int64_t i) const {
    return rq ? (rq->start(b) + i) * f.h_q + h : (b * f.h_q + h) * f.s_q + i;
  }

  bool item_of(const kernels::RaggedSide* side, int64_t heads, int64_t s, int64_t item, int64_t* b,
               int64_t* h, int64_t* i) const {
    if (side == nullptr) {
      *i = item % s;
      *h = item / s % heads;
      *b = item / s / heads;
      return true;
    }
    const int64_t t = item / heads;
    *h = item % heads;
    // The first batch whose slot holds the token: slots do not overlap for offsets that are
    // non-decreasing, as DESIGN 2.1 asks; for any others this still picks one writer.
    for (int64_t bb = 0; bb < f.b; ++bb) {
      const kernels::Slot sl = side->slot(bb);
      if (sl.start <= t && t < sl.end) {
        *b = bb;
        *i = t - sl.start;
        return true;
      }
    }
    return false;
  }

  bool has_bias() const { return f.has(TensorId::bias); }
  bool has_sink() const { return f.has(TensorId::sink); }
  double sigma(int64_t h) const { return sink.load(h); }

  // The actual lengths of batch b and the band's offset for them.
  Lengths lengths(int64_t b) const {
    Lengths l;
    l.sq = rq ? rq->slot(b).len : length(seq_len_q, TensorId::seq_len_q, b, f.s_q);
    l.skv = rkv ? rkv->slot(b).len : length(seq_len_kv, TensorId::seq_len_kv, b, f.s_kv);
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
