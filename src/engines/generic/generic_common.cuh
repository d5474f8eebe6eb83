// Device helpers of the generic engine shared by its forward and backward kernels: actual
// batch lengths (P6: read on the device), the visible ranges of the band mask, and the score
// modifiers (scale, softcap, bias) of DESIGN §2. CUDA-only header.
#pragma once

#include <cstdint>

#include "engines/generic/generic_params.h"
#include "engines/generic/strided_view.cuh"
#include "kernels/constants.h"
#include "kernels/ragged_pad.cuh"

namespace floe::detail::generic {

using tile::load_elem;
using tile::make_row_view;
using tile::make_view;
using tile::store_elem;
using tile::View2D;

using kernels::kLn2;
using kernels::kLog2e;

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}
__device__ __forceinline__ int64_t max64(int64_t a, int64_t b) {
  return a > b ? a : b;
}

// The actual lengths of batch b and the diagonal's offset (|off| < 2^31: both lengths are).
// Indices below are int: every extent is below 2^31 (validation); only element offsets,
// index * stride, need 64 bits.
// A ragged side adds q0 / kv0, the first token of the batch's slot, to every row index;
// q_rows / kv_rows are the rows of the slot the tile grids write (padding included, up to
// s_q / s_kv). Trivially constructible: it lives in __shared__ state.
struct BatchLens {
  int sq, skv, off;
  int64_t q0, kv0;
  int q_rows, kv_rows;
};

__device__ __forceinline__ BatchLens batch_lens(const Params& p, int b) {
  BatchLens L;
  L.q0 = 0;
  L.kv0 = 0;
  L.q_rows = static_cast<int>(p.s_q);
  L.kv_rows = static_cast<int>(p.s_kv);
  if (p.ragged_q) {
    const kernels::Slot s = p.rq.slot(b);
    L.sq = static_cast<int>(s.len);
    L.q0 = s.start;
    L.q_rows = static_cast<int>(min64(s.end - s.start, p.s_q));
  } else {
    L.sq = p.lens.q_len(b, static_cast<int>(p.s_q));
  }
  if (p.ragged_kv) {
    const kernels::Slot s = p.rkv.slot(b);
    L.skv = static_cast<int>(s.len);
    L.kv0 = s.start;
    L.kv_rows = static_cast<int>(min64(s.end - s.start, p.s_kv));
  } else {
    L.skv = p.lens.kv_len(b, static_cast<int>(p.s_kv));
  }
  L.off = p.band.bottom_right ? L.skv - L.sq : 0;
  return L;
}

// An output's rows past a ragged slot's envelope, for kernels::pad_slot_rows (no stats).
__device__ __forceinline__ kernels::PadRows pad_rows(const TensorArg& t, int64_t heads,
                                                     int64_t cols) {
  return kernels::PadRows{static_cast<uint16_t*>(t.ptr), t.s[1], t.s[2], t.s[3], heads, cols};
}

// Keys visible to query i (0 <= i < sq): [lo, hi] with 0 <= lo <= skv and -1 <= hi < skv,
// empty when lo > hi.
__device__ __forceinline__ void keys_of_query(const Params& p, const BatchLens& L, int i, int& lo,
                                              int& hi) {
  lo = 0;
  hi = L.skv - 1;
  if (p.band.has_left) {
    lo = static_cast<int>(max64(0, min64(int64_t{i} + L.off - p.band.left, L.skv)));
  }
  if (p.band.has_right) {
    hi = static_cast<int>(min64(hi, max64(int64_t{i} + L.off + p.band.right, -1)));
  }
}

// Keys visible to at least one query of [i0, i1] (0 <= i0 <= i1 < sq): the band's edges
// move right with i, so [first key of i0, last key of i1] holds them all.
__device__ __forceinline__ void keys_of_queries(const Params& p, const BatchLens& L, int i0, int i1,
                                                int& lo, int& hi) {
  int unused;
  keys_of_query(p, L, i0, lo, unused);
  keys_of_query(p, L, i1, unused, hi);
}

// Queries that see at least one key of [j0, j1] (0 <= j0 <= j1 < skv): [lo, hi] holds them.
__device__ __forceinline__ void queries_of_keys(const Params& p, const BatchLens& L, int j0, int j1,
                                                int& lo, int& hi) {
  lo = 0;
  hi = L.sq - 1;
  if (p.band.has_right) {
    lo = static_cast<int>(max64(0, min64(int64_t{j0} - L.off - p.band.right, L.sq)));
  }
  if (p.band.has_left) {
    hi = static_cast<int>(min64(hi, max64(int64_t{j1} - L.off + p.band.left, -1)));
  }
}

// The visible keys [lo, hi] of query i, empty for a padded query (i >= sq).
__device__ __forceinline__ void row_window(const Params& p, const BatchLens& L, int i, int& lo,
                                           int& hi) {
  if (i < L.sq) {
    keys_of_query(p, L, i, lo, hi);
  } else {
    lo = 1;
    hi = 0;
  }
}

// The logit of one visible score in base 2: t = log2(e) * (cap * tanh(x / cap) + bias) with
// x = scale * dot (the softcap term only when set). th receives tanh(x / cap) (0 without a
// softcap), which the backward needs for the softcap's derivative.
__device__ __forceinline__ float logit2(const Params& p, float dot, float bias, float& th) {
  if (!p.has_softcap) {
    th = 0.f;
    return fmaf(dot, p.scale_log2, bias * kLog2e);
  }
  th = tanhf(dot * p.scale * p.inv_softcap);
  return fmaf(p.softcap, th, bias) * kLog2e;
}

// The bias of (b, h) row i, key j; 0 when the problem has none.
template <class T>
__device__ __forceinline__ float bias_at(const Params& p, int b, int h, int i, int j) {
  if (!p.has_bias) return 0.f;
  const auto* base = static_cast<const uint16_t*>(p.bias.ptr);
  return load_elem<T>(base, b * p.bias.s[0] + h * p.bias.s[1] + i * p.bias.s[2] + j * p.bias.s[3]);
}

// The sink logit of head h.
__device__ __forceinline__ float sink_at(const Params& p, int h) {
  return static_cast<const float*>(p.sink.ptr)[h * p.sink.s[0]];
}

// Peels the fastest coordinate (of extent `extent`) off a logical block index.
__device__ __forceinline__ int take(int64_t& rest, int64_t extent) {
  const int64_t v = rest % extent;
  rest /= extent;
  return static_cast<int>(v);
}

// Base of (b, h) in a rank-4 input tensor.
__device__ __forceinline__ const uint16_t* in_ptr(const TensorArg& t, int b, int h) {
  return static_cast<const uint16_t*>(t.ptr) + b * t.s[0] + h * t.s[1];
}
__device__ __forceinline__ uint16_t* out_ptr(const TensorArg& t, int b, int h) {
  return static_cast<uint16_t*>(t.ptr) + b * t.s[0] + h * t.s[1];
}

}  // namespace floe::detail::generic
