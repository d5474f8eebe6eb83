// Forward: one item per query row (b, h, i); a ragged query side has one per (token, head),
// and tokens outside every batch's slot are left alone (DESIGN 2.1). The row's logits are kept in
// scratch, so each q.k is computed once; O = sum_j exp(s_j - LSE) v_j with LSE over the visible
// keys and sink.
#include <algorithm>
#include <cmath>

#include "engines/reference/reference_parallel.h"
#include "engines/reference/reference_passes.h"

namespace floe::detail::reference {

int64_t forward_scratch_doubles(const Facts& f) {
  return f.d_qk + f.d_v + f.s_kv;
}

namespace {

void forward_row(const Operands& ops, int64_t b, int64_t h, int64_t i, double* scratch) {
  const Facts& f = ops.f;
  double* q = scratch;       // [d_qk]
  double* acc = q + f.d_qk;  // [d_v]
  double* s = acc + f.d_v;   // [s_kv]: logits of the visible keys
  const bool write_stats = f.has(TensorId::stats);
  const Lengths len = ops.lengths(b);
  std::fill(acc, acc + f.d_v, 0.0);

  if (i >= len.sq) {  // a padded row
    ops.o.store_row(b, h, i, f.d_v, acc);
    if (write_stats) ops.stats.store(kNegInf, b, h, i);
    return;
  }
  ops.q.load_row(b, h, i, f.d_qk, q);
  const int64_t hk = h / f.group;
  int64_t first = 0, last = -1;
  ops.key_range(len, i, &first, &last);

  // The max propagates NaN (std::max would drop it): a NaN logit or sink makes m, LSE and O NaN,
  // and a +inf one makes exp(s - m) = exp(inf - inf) NaN, as DESIGN section 2 asks.
  double m = ops.has_sink() ? ops.sigma(h) : kNegInf;
  for (int64_t j = first; j <= last; ++j) {
    s[j] = ops.logit(ops.k.dot_row(q, b, hk, j, f.d_qk), b, h, i, j).s;
    m = nan_max(m, s[j]);
  }
  double lse = kNegInf;  // no visible key with a logit above -inf (nor a sink): O = 0, -inf
  if (m != kNegInf) {
    double l = ops.has_sink() ? std::exp(ops.sigma(h) - m) : 0.0;
    for (int64_t j = first; j <= last; ++j) l += std::exp(s[j] - m);
    lse = m + std::log(l);
    for (int64_t j = first; j <= last; ++j) {
      const double p = Operands::prob(s[j], lse);
      for (int64_t d = 0; d < f.d_v; ++d) acc[d] += p * ops.v.load(b, hk, j, d);
    }
  }
  // O = sum / l: with no visible key and a NaN (or +inf) sink that is 0 / NaN, not 0.
  if (std::isnan(lse)) std::fill(acc, acc + f.d_v, lse);
  ops.o.store_row(b, h, i, f.d_v, acc);
  if (write_stats) ops.stats.store(lse, b, h, i);
}

}  // namespace

void run_forward(const Operands& ops, const Workspace& ws, int threads) {
  for_each_item(threads, ops.q_items(), ws.carve<double>(kRowScratch),
                forward_scratch_doubles(ops.f), [&](int64_t item, double* scratch) {
                  int64_t b = 0, h = 0, i = 0;
                  if (ops.q_item(item, &b, &h, &i)) forward_row(ops, b, h, i, scratch);
                });
}

}  // namespace floe::detail::reference
