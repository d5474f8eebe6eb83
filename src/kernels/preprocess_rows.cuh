// The backward's preprocess over one query tile's rows, the same on every tensor-core engine:
//   delta[r]    = sum_d dO * O (0 for rows past the batch's query length),
//   lse_log2[r] = LSE * log2(e) from the stats (through their strides); +inf for rows past the
//                 batch's query length and rows whose LSE is -inf, so that P = 2^(s2 - lse2) = 0.
// O and dO rows are read 16 bytes a lane, 8 lanes a row: their head dim is a multiple of 8 and
// their rows 16-byte aligned (the engines' stride rules).
// And the sink's gradient from those dense rows, one CTA per head (dsink_rows, block_sum_fixed):
//   dsink_h = -sum_{b, i} 2^(sink_h * log2(e) - lse2_{b,h,i}) * delta_{b,h,i},
// in fp64, each thread over a fixed index set and then a fixed tree: bitwise the same every run.
#pragma once

#include <cmath>
#include <cstdint>

#include <cute/config.hpp>

#include "kernels/constants.h"
#include "kernels/strides.h"

namespace floe::kernels {

struct PreprocessRows {
  const void* o;  // the (b, h) slice's row 0
  const void* d_o;
  int64_t o_stride_s, do_stride_s;
  const float* stats;  // the (b, h) slice's row 0
  int64_t stats_stride_s;
  int d;            // the head dim of O and dO
  int m0;           // the tile's first row
  int rows;         // the batch's query length: rows from here on get delta 0 and lse +inf
  float* delta;     // the tile's row 0 in the dense chunk
  float* lse_log2;  // likewise

  // O, dO and the stats of head h of batch b from token q0 on (a ragged side's slot; else 0),
  // through their [b, h, s] strides; the other fields are the caller's.
  template <class Element>
  static __device__ __forceinline__ PreprocessRows at(const void* o, const Strides3& os,
                                                      const void* d_o, const Strides3& dos,
                                                      const float* stats, const Strides3& ss,
                                                      int64_t b, int64_t h, int64_t q0) {
    PreprocessRows r;
    r.o = static_cast<const Element*>(o) + b * os.b + h * os.h + q0 * os.s;
    r.d_o = static_cast<const Element*>(d_o) + b * dos.b + h * dos.h + q0 * dos.s;
    r.o_stride_s = os.s;
    r.do_stride_s = dos.s;
    r.stats = stats + b * ss.b + h * ss.h + q0 * ss.s;
    r.stats_stride_s = ss.s;
    return r;
  }
};

template <class Element, int kBlockM, int kThreads>
__device__ __forceinline__ void preprocess_rows(const PreprocessRows& a, int tid) {
  constexpr int kLanesPerRow = 8;  // 8 lanes x 16 bytes = one 64-element slice of a row
  const Element* o = static_cast<const Element*>(a.o);
  const Element* d_o = static_cast<const Element*>(a.d_o);
  const int lane8 = tid % kLanesPerRow;
  for (int r = tid / kLanesPerRow; r < kBlockM; r += kThreads / kLanesPerRow) {
    const int i = a.m0 + r;
    float sum = 0.f;
    if (i < a.rows) {
      for (int c = lane8 * 8; c < a.d; c += kLanesPerRow * 8) {
        const uint4 ov = *reinterpret_cast<const uint4*>(o + i * a.o_stride_s + c);
        const uint4 dv = *reinterpret_cast<const uint4*>(d_o + i * a.do_stride_s + c);
        const Element* oe = reinterpret_cast<const Element*>(&ov);
        const Element* de = reinterpret_cast<const Element*>(&dv);
        CUTE_UNROLL
        for (int e = 0; e < 8; ++e)
          sum = fmaf(static_cast<float>(oe[e]), static_cast<float>(de[e]), sum);
      }
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    sum += __shfl_xor_sync(0xffffffffu, sum, 4);
    if (lane8 == 0) {
      a.delta[r] = sum;
      float lse2 = INFINITY;
      if (i < a.rows) {
        const float lse = a.stats[i * a.stats_stride_s];
        if (lse != -INFINITY) lse2 = lse * kLog2e;
      }
      a.lse_log2[r] = lse2;
    }
  }
}

// dSink's terms of one (batch, head)'s dense rows [0, rows), this thread's share (rows tid,
// tid + kThreads, ...) added to sum; rows with lse2 = +inf (past the batch's length, or that saw
// no key) add nothing.
template <int kThreads>
__device__ __forceinline__ double dsink_rows(const float* lse_log2, const float* delta, int rows,
                                             float sink_log2, int tid, double sum) {
  for (int i = tid; i < rows; i += kThreads) {
    const float lse2 = lse_log2[i];
    if (lse2 == INFINITY) continue;
    sum += static_cast<double>(exp2f(sink_log2 - lse2)) * delta[i];
  }
  return sum;
}

// The CTA's sum of every thread's v by a fixed tree, left in partial[0] (partial: kThreads
// doubles of shared memory; every thread calls it).
template <int kThreads>
__device__ __forceinline__ void block_sum_fixed(double v, double* partial, int tid) {
  partial[tid] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (tid < s) partial[tid] += partial[tid + s];
    __syncthreads();
  }
}

}  // namespace floe::kernels
