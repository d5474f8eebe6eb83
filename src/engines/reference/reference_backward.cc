// Backward: P = exp(s - LSE) with LSE as given in stats, dP = dO.v, dS = P (dP - Delta),
// dT = dS ds/dx (softcap), then
//   dQ_i = scale sum_j dT_ij k_j          one item per query row
//   dK_j = scale sum_{h,i} dT_ij q_i      one item per key row of a kv head: the sum runs over
//   dV_j = sum_{h,i} P_ij dO_i            the query heads of its group, so GQA needs no atomics
//   dBias = sum over broadcast dims of dS one item per dbias row
//   dSink_h = -sum_{b,i} exp(sigma_h - LSE) Delta
// Each output element is summed by exactly one item in a fixed order, so results do not depend
// on threads. The price is recomputing P per pass; this engine is a yardstick, not a race car.
#include <algorithm>
#include <cmath>

#include "engines/reference/reference_parallel.h"
#include "engines/reference/reference_passes.h"

namespace floe::detail::reference {

// Rows q_i and dO_i, then the accumulators of whichever pass runs.
int64_t backward_scratch_doubles(const Facts& f) {
  return f.d_qk + f.d_v + std::max(f.d_qk + f.d_v, f.s_kv);
}

namespace {

struct PairGrad {
  double p = 0, ds = 0, dt = 0;
};

// The gradient terms of visible pair (i, j) of head h, with q_i and dO_i already loaded.
// Every pass calls this one function, so they all see bit-identical P and dS.
PairGrad pair_grad(const Operands& ops, const double* q, const double* d_o, double lse,
                   double delta, int64_t b, int64_t h, int64_t i, int64_t j) {
  const Facts& f = ops.f;
  const int64_t hk = h / f.group;
  const Logit lg = ops.logit(ops.k.dot_row(q, b, hk, j, f.d_qk), b, h, i, j);
  PairGrad g;
  g.p = Operands::prob(lg.s, lse);
  g.ds = g.p * (ops.v.dot_row(d_o, b, hk, j, f.d_v) - delta);
  g.dt = g.ds * lg.dcap;
  return g;
}

struct Backward {
  const Operands& ops;
  const Facts& f;
  const double* delta;  // per query-side item (Operands::q_items), valid for rows i < sq_b

  // Loads row i of head h: q into scratch[0, d_qk), dO into scratch[d_qk, d_qk + d_v).
  void load_rows(int64_t b, int64_t h, int64_t i, double* scratch) const {
    ops.q.load_row(b, h, i, f.d_qk, scratch);
    ops.d_o.load_row(b, h, i, f.d_v, scratch + f.d_qk);
  }
  double lse(int64_t b, int64_t h, int64_t i) const { return ops.stats.load(b, h, i); }

  void dq_row(int64_t b, int64_t h, int64_t i, double* scratch) const {
    double* acc = scratch + f.d_qk + f.d_v;  // [d_qk]
    std::fill(acc, acc + f.d_qk, 0.0);
    const Lengths len = ops.lengths(b);
    if (i < len.sq) {
      load_rows(b, h, i, scratch);
      const int64_t hk = h / f.group;
      const double l = lse(b, h, i), dl = delta[ops.q_item_index(b, h, i)];
      int64_t first = 0, last = -1;
      ops.key_range(len, i, &first, &last);
      for (int64_t j = first; j <= last; ++j) {
        const PairGrad g = pair_grad(ops, scratch, scratch + f.d_qk, l, dl, b, h, i, j);
        for (int64_t d = 0; d < f.d_qk; ++d) acc[d] += g.dt * ops.k.load(b, hk, j, d);
      }
      for (int64_t d = 0; d < f.d_qk; ++d) acc[d] *= f.scale;
    }
    ops.dq.store_row(b, h, i, f.d_qk, acc);
  }

  void dkdv_row(int64_t b, int64_t hk, int64_t j, double* scratch) const {
    double* acc_k = scratch + f.d_qk + f.d_v;  // [d_qk]
    double* acc_v = acc_k + f.d_qk;            // [d_v]
    std::fill(acc_k, acc_k + f.d_qk + f.d_v, 0.0);
    const Lengths len = ops.lengths(b);
    if (j < len.skv) {
      for (int64_t h = hk * f.group; h < (hk + 1) * f.group; ++h) {
        for (int64_t i = 0; i < len.sq; ++i) {
          if (!ops.visible(len, i, j)) continue;
          load_rows(b, h, i, scratch);
          const PairGrad g = pair_grad(ops, scratch, scratch + f.d_qk, lse(b, h, i),
                                       delta[ops.q_item_index(b, h, i)], b, h, i, j);
          for (int64_t d = 0; d < f.d_qk; ++d) acc_k[d] += g.dt * scratch[d];
          for (int64_t d = 0; d < f.d_v; ++d) acc_v[d] += g.p * scratch[f.d_qk + d];
        }
      }
      for (int64_t d = 0; d < f.d_qk; ++d) acc_k[d] *= f.scale;
    }
    ops.dk.store_row(b, hk, j, f.d_qk, acc_k);
    ops.dv.store_row(b, hk, j, f.d_v, acc_v);
  }

  // Row i of dbias[bb, bh]: the sum of dS over the batches and heads that share it.
  void dbias_row(int64_t bb, int64_t bh, int64_t i, double* scratch) const {
    double* acc = scratch + f.d_qk + f.d_v;  // [s_kv]
    std::fill(acc, acc + f.s_kv, 0.0);
    const bool all_b = f.bias_broadcast_b(), all_h = f.bias_broadcast_h();
    for (int64_t b = all_b ? 0 : bb; b < (all_b ? f.b : bb + 1); ++b) {
      const Lengths len = ops.lengths(b);
      if (i >= len.sq) continue;
      for (int64_t h = all_h ? 0 : bh; h < (all_h ? f.h_q : bh + 1); ++h) {
        load_rows(b, h, i, scratch);
        const double l = lse(b, h, i), dl = delta[ops.q_item_index(b, h, i)];
        int64_t first = 0, last = -1;
        ops.key_range(len, i, &first, &last);
        for (int64_t j = first; j <= last; ++j) {
          acc[j] += pair_grad(ops, scratch, scratch + f.d_qk, l, dl, b, h, i, j).ds;
        }
      }
    }
    ops.dbias.store_row(bb, bh, i, f.s_kv, acc);
  }

  // Cheap (B * Sq terms per head), so one thread, in order of b then i.
  void dsink() const {
    for (int64_t h = 0; h < f.h_q; ++h) {
      const double sigma = ops.sigma(h);
      double sum = 0;
      for (int64_t b = 0; b < f.b; ++b) {
        const Lengths len = ops.lengths(b);
        for (int64_t i = 0; i < len.sq; ++i) {
          // A row without weight (LSE -inf) adds nothing, not 0 * Delta (NaN when Delta is).
          const double l = lse(b, h, i);
          if (l == kNegInf) continue;
          sum += Operands::prob(sigma, l) * delta[ops.q_item_index(b, h, i)];
        }
      }
      ops.dsink.store(-sum, h);
    }
  }
};

}  // namespace

void run_backward(const Operands& ops, const Workspace& ws, int threads) {
  const Facts& f = ops.f;
  double* scratch = ws.carve<double>(kRowScratch);
  const int64_t per_thread = backward_scratch_doubles(f);
  double* delta = ws.carve<double>(kDelta);

  // Delta = dO . O for every real query row; padded rows are never read.
  for_each_item(threads, ops.q_items(), scratch, per_thread, [&](int64_t item, double*) {
    int64_t b = 0, h = 0, i = 0;
    double sum = 0;
    if (ops.q_item(item, &b, &h, &i) && i < ops.lengths(b).sq) {
      for (int64_t d = 0; d < f.d_v; ++d) sum += ops.d_o.load(b, h, i, d) * ops.o.load(b, h, i, d);
    }
    delta[item] = sum;
  });

  const Backward bwd{ops, f, delta};
  for_each_item(threads, ops.q_items(), scratch, per_thread, [&](int64_t item, double* s) {
    int64_t b = 0, h = 0, i = 0;
    if (ops.q_item(item, &b, &h, &i)) bwd.dq_row(b, h, i, s);
  });
  for_each_item(threads, ops.kv_items(), scratch, per_thread, [&](int64_t item, double* s) {
    int64_t b = 0, hk = 0, j = 0;
    if (ops.kv_item(item, &b, &hk, &j)) bwd.dkdv_row(b, hk, j, s);
  });
  if (f.has(TensorId::dbias)) {
    const TensorDesc& d = f.t(TensorId::dbias);
    for_each_item(
        threads, d.dims[0] * d.dims[1] * f.s_q, scratch, per_thread, [&](int64_t item, double* s) {
          bwd.dbias_row(item / f.s_q / d.dims[1], item / f.s_q % d.dims[1], item % f.s_q, s);
        });
  }
  if (f.has(TensorId::dsink)) bwd.dsink();
}

}  // namespace floe::detail::reference
