// generic backward. No atomics: every output element is computed by one thread of one block
// in a fixed order, so every plan is bitwise deterministic (P7).
//
//   delta:  Delta[b, h, i] = sum_d dO * O (0 for padded rows), one warp a row.
//   dsink:  dsink[h] = -sum_{b, i < sq_b} exp(sigma_h - LSE) * Delta, one block a head (fp64).
//   dkdv:   one block per (b, h_kv, tile of 64 keys, chunk of 64 head-dim columns): loops over
//           the group's query heads and every query tile that can see its keys, recomputes
//           S^T, P^T (and dP^T, dS^T for dK) and accumulates dK, dV in registers.
//   dq:     one block per (b, h_q, tile of 64 queries, chunk of 64 d_qk columns).
//   dbias:  one block per (bias b, bias h, query tile, key tile): sums dS over the (b, h)
//           pairs the bias broadcasts to.
// P is exp(s - LSE) with LSE as given (not recomputed); dS = P (dP - Delta); through the
// softcap dT = dS (1 - tanh^2); dQ = scale dT K; dK = scale dT^T Q; dV = P^T dO.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "engines/generic/generic_common.cuh"
#include "engines/generic/generic_kernels.h"
#include "engines/generic/generic_tile_gemm.cuh"

namespace floe::detail::generic {
namespace {

union BackwardStage {
  tile::NtSmem nt;
  tile::NnSmem<1> nn;
};

// Blocks per SM the backward tile kernels are compiled for (register budget 65536 / (256 * n)).
#ifndef FLOE_GENERIC_BWD_MIN_BLOCKS
#define FLOE_GENERIC_BWD_MIN_BLOCKS 2
#endif
inline constexpr int kBackwardMinBlocks = FLOE_GENERIC_BWD_MIN_BLOCKS;

__device__ __forceinline__ void zero(float (&a)[4][4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) a[i][j] = 0.f;
  }
}

// Row i of batch b (a ragged side's rows start at L.q0).
__device__ __forceinline__ float stat_at(const Params& p, const BatchLens& L, int b, int h, int i) {
  return static_cast<const float*>(
      p.stats.ptr)[b * p.stats.s[0] + h * p.stats.s[1] + (L.q0 + i) * p.stats.s[2]];
}
__device__ __forceinline__ int64_t delta_index(const Params& p, int b, int h, int i) {
  return (b * p.h_q + h) * p.s_q + i;
}

// ---------------------------------------------------------------------------------------
// Delta

template <class T>
__global__ void __launch_bounds__(kThreads) generic_delta_kernel(const Params p, int64_t blocks) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int64_t rows = p.b * p.h_q * p.s_q;
  for (int64_t blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
    const int64_t r = blk * kDeltaRowsPerBlock + warp;
    if (r >= rows) continue;
    int64_t rest = r;
    const int i = take(rest, p.s_q);
    const int h = take(rest, p.h_q);
    const int b = static_cast<int>(rest);
    const BatchLens L = batch_lens(p, b);
    float sum = 0.f;
    if (i < L.sq) {
      const uint16_t* o = in_ptr(p.o, b, h) + (L.q0 + i) * p.o.s[2];
      const uint16_t* d = in_ptr(p.d_o, b, h) + (L.q0 + i) * p.d_o.s[2];
      for (int e = lane; e < p.d_v; e += 32) {
        sum = fmaf(load_elem<T>(o, e * p.o.s[3]), load_elem<T>(d, e * p.d_o.s[3]), sum);
      }
    }
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, m);
    if (lane == 0) p.delta[r] = sum;
  }
}

// ---------------------------------------------------------------------------------------
// dsink

__global__ void __launch_bounds__(kThreads) generic_dsink_kernel(const Params p, int64_t blocks) {
  __shared__ double part[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  for (int64_t hh = blockIdx.x; hh < blocks; hh += gridDim.x) {
    const int h = static_cast<int>(hh);
    const double sigma = sink_at(p, h);
    double acc = 0.0;
    for (int b = 0; b < p.b; ++b) {
      const BatchLens L = batch_lens(p, b);
      for (int i = tid; i < L.sq; i += kThreads) {
        const double lse = stat_at(p, L, b, h, i);
        if (lse == -INFINITY) continue;  // a row without weight adds nothing (DESIGN 2, sm80)
        acc += exp(sigma - lse) * static_cast<double>(p.delta[delta_index(p, b, h, i)]);
      }
    }
    part[tid] = acc;
    __syncthreads();
    for (int w = kThreads / 2; w > 0; w >>= 1) {
      if (tid < w) part[tid] += part[tid + w];
      __syncthreads();
    }
    if (tid == 0) static_cast<float*>(p.dsink.ptr)[h * p.dsink.s[0]] = static_cast<float>(-part[0]);
    __syncthreads();
  }
}

// ---------------------------------------------------------------------------------------
// Shared by dkdv, dq and dbias.

// P and dS of one 64 x 64 tile from S and dP. Tile rows are keys (KeyRows) or queries,
// columns the other; the thread's 4 queries start at q0. st holds the raw dot products and
// becomes P; dpt holds dP (when with_dp) and becomes dT = dS (1 - tanh^2) (dS itself with
// plain_ds, or without a softcap). Invisible scores give exactly 0 (a select, never a
// product), so padded queries and keys contribute nothing. A query's LSE, Delta and window
// are loaded just before its 4 scores (fewer live registers).
template <class T, bool KeyRows>
__device__ __forceinline__ void probabilities(const Params& p, const BatchLens& L, int b, int h,
                                              int q0, int k0, float (&st)[4][4], float (&dpt)[4][4],
                                              bool with_dp, bool plain_ds) {
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int qi = q0 + q;
    int klo, khi;
    row_window(p, L, qi, klo, khi);
    float lse2 = 0.f, dl = 0.f;
    if (qi < L.sq) {
      // LSE -inf marks a row without weight: every P of it is 0 (+inf - +inf stays NaN).
      const float lse = stat_at(p, L, b, h, qi);
      lse2 = lse == -INFINITY ? INFINITY : lse * kLog2e;
      dl = p.delta[delta_index(p, b, h, qi)];
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int kj = k0 + k;
      const int i = KeyRows ? k : q, j = KeyRows ? q : k;
      float pv = 0.f, dt = 0.f;
      if (kj >= klo && kj <= khi) {
        float th;
        const float t = logit2(p, st[i][j], bias_at<T>(p, b, h, qi, kj), th);
        pv = exp2f(t - lse2);
        if (with_dp) {
          const float ds = pv * (dpt[i][j] - dl);
          dt = (p.has_softcap && !plain_ds) ? ds * fmaf(-th, th, 1.f) : ds;
        }
      }
      st[i][j] = pv;
      dpt[i][j] = dt;
    }
  }
}

// ---------------------------------------------------------------------------------------
// dK, dV

// What a dkdv block works on, decoded by thread 0 into shared memory (see ForwardState).
struct DkdvState {
  const uint16_t* k;  // K of (b, h_kv) at key n0
  const uint16_t* v;  // V of (b, h_kv) at key n0
  BatchLens L;
  int b, hk, n0, keys, col0, k_cols, v_cols;
  bool do_dk, do_dv;
  int qlo, qhi;  // queries that can see a key of the tile
};

__device__ __forceinline__ void dkdv_state(const Params& p, int64_t blk, DkdvState& fs) {
  const int chunk = take(blk, p.n_ck > p.n_cv ? p.n_ck : p.n_cv);
  fs.n0 = take(blk, p.n_kt) * kTile;
  fs.hk = take(blk, p.h_kv);
  fs.b = static_cast<int>(blk);
  fs.L = batch_lens(p, fs.b);
  fs.keys = min(kTile, fs.L.skv - fs.n0);
  fs.col0 = chunk * kDChunk;
  fs.do_dk = chunk < p.n_ck;
  fs.do_dv = chunk < p.n_cv;
  fs.k_cols = min(kDChunk, static_cast<int>(p.d_qk) - fs.col0);
  fs.v_cols = min(kDChunk, static_cast<int>(p.d_v) - fs.col0);
  fs.k = in_ptr(p.k, fs.b, fs.hk) + (fs.L.kv0 + fs.n0) * p.k.s[2];
  fs.v = in_ptr(p.v, fs.b, fs.hk) + (fs.L.kv0 + fs.n0) * p.v.s[2];
  fs.qlo = 0;
  fs.qhi = -1;
  if (fs.keys > 0) queries_of_keys(p, fs.L, fs.n0, fs.n0 + fs.keys - 1, fs.qlo, fs.qhi);
}

template <class T>
__device__ __forceinline__ void dkdv_block(const Params& p, const DkdvState& fs, BackwardStage& st,
                                           tile::XTile& xt, int tid, int ty, int tx) {
  float acc_dk[4][4], acc_dv[4][4];
  zero(acc_dk);
  zero(acc_dv);

  const int group = static_cast<int>(p.group);
  for (int g = 0; g < group && fs.qlo <= fs.qhi; ++g) {
    for (int m0 = fs.qlo / kTile * kTile; m0 <= fs.qhi; m0 += kTile) {
      const int h = fs.hk * group + g;
      const int rows = min(kTile, fs.L.sq - m0);
      const uint16_t* qm = in_ptr(p.q, fs.b, h) + (fs.L.q0 + m0) * p.q.s[2];
      const uint16_t* dom = in_ptr(p.d_o, fs.b, h) + (fs.L.q0 + m0) * p.d_o.s[2];
      float s[4][4], dp[4][4];
      zero(s);
      zero(dp);
      tile::gemm_nt<T>(s, make_view(fs.k, p.k.s[2], p.k.s[3], fs.keys, p.d_qk),
                       make_view(qm, p.q.s[2], p.q.s[3], rows, p.d_qk), static_cast<int>(p.d_qk),
                       st.nt, tid, ty, tx);
      if (fs.do_dk) {
        tile::gemm_nt<T>(dp, make_view(fs.v, p.v.s[2], p.v.s[3], fs.keys, p.d_v),
                         make_view(dom, p.d_o.s[2], p.d_o.s[3], rows, p.d_v),
                         static_cast<int>(p.d_v), st.nt, tid, ty, tx);
      }
      probabilities<T, true>(p, fs.L, fs.b, h, m0 + 4 * tx, fs.n0 + 4 * ty, s, dp, fs.do_dk, false);
      if (fs.do_dv) {
        tile::write_x(xt, s, ty, tx);
        tile::gemm_nn<T, 1>(
            acc_dv, xt,
            make_view(dom + fs.col0 * p.d_o.s[3], p.d_o.s[2], p.d_o.s[3], rows, fs.v_cols), st.nn,
            tid, ty, tx);
      }
      if (fs.do_dk) {
        tile::write_x(xt, dp, ty, tx);
        const uint16_t* qc =
            in_ptr(p.q, fs.b, fs.hk * group + g) + (fs.L.q0 + m0) * p.q.s[2] + fs.col0 * p.q.s[3];
        tile::gemm_nn<T, 1>(acc_dk, xt, make_view(qc, p.q.s[2], p.q.s[3], rows, fs.k_cols), st.nn,
                            tid, ty, tx);
      }
    }
  }

  // Keys past skv_b (and whole padded tiles) get zeros: their accumulators never moved.
  uint16_t* dkb = out_ptr(p.dk, fs.b, fs.hk) + fs.L.kv0 * p.dk.s[2] + fs.col0 * p.dk.s[3];
  uint16_t* dvb = out_ptr(p.dv, fs.b, fs.hk) + fs.L.kv0 * p.dv.s[2] + fs.col0 * p.dv.s[3];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int n = fs.n0 + 4 * ty + i;
    if (n >= fs.L.kv_rows) continue;  // s_kv, or the slot's rows up to s_kv
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = 4 * tx + j;
      if (fs.do_dk && c < fs.k_cols) {
        store_elem<T>(dkb, n * p.dk.s[2] + c * p.dk.s[3], acc_dk[i][j] * p.scale);
      }
      if (fs.do_dv && c < fs.v_cols)
        store_elem<T>(dvb, n * p.dv.s[2] + c * p.dv.s[3], acc_dv[i][j]);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads, kBackwardMinBlocks)
    generic_dkdv_kernel(const Params p, int64_t blocks) {
  __shared__ __align__(16) BackwardStage st;
  __shared__ __align__(16) tile::XTile xt;
  __shared__ DkdvState fs;
  const int tid = static_cast<int>(threadIdx.x), ty = tid >> 4, tx = tid & 15;
  for (int64_t blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
    __syncthreads();
    if (tid == 0) dkdv_state(p, blk, fs);
    __syncthreads();
    dkdv_block<T>(p, fs, st, xt, tid, ty, tx);
  }
}

// ---------------------------------------------------------------------------------------
// dQ

struct DqState {
  const uint16_t* q;    // Q of (b, h) at row m0
  const uint16_t* d_o;  // dO of (b, h) at row m0
  const uint16_t* k;    // K of (b, h_kv)
  const uint16_t* v;    // V of (b, h_kv)
  BatchLens L;
  int b, h, m0, rows, col0, cols;
  int klo, khi;  // keys that a valid row of the tile can see
};

__device__ __forceinline__ void dq_state(const Params& p, int64_t blk, DqState& fs) {
  const int chunk = take(blk, p.n_ck);
  fs.m0 = take(blk, p.n_qt) * kTile;
  fs.h = take(blk, p.h_q);
  fs.b = static_cast<int>(blk);
  const int hk = fs.h / static_cast<int>(p.group);
  fs.L = batch_lens(p, fs.b);
  fs.rows = min(kTile, fs.L.sq - fs.m0);
  fs.col0 = chunk * kDChunk;
  fs.cols = min(kDChunk, static_cast<int>(p.d_qk) - fs.col0);
  fs.q = in_ptr(p.q, fs.b, fs.h) + (fs.L.q0 + fs.m0) * p.q.s[2];
  fs.d_o = in_ptr(p.d_o, fs.b, fs.h) + (fs.L.q0 + fs.m0) * p.d_o.s[2];
  fs.k = in_ptr(p.k, fs.b, hk) + fs.L.kv0 * p.k.s[2];
  fs.v = in_ptr(p.v, fs.b, hk) + fs.L.kv0 * p.v.s[2];
  fs.klo = 0;
  fs.khi = -1;
  if (fs.rows > 0) keys_of_queries(p, fs.L, fs.m0, fs.m0 + fs.rows - 1, fs.klo, fs.khi);
}

template <class T>
__device__ __forceinline__ void dq_block(const Params& p, const DqState& fs, BackwardStage& st,
                                         tile::XTile& xt, int tid, int ty, int tx) {
  float acc[4][4];
  zero(acc);
  for (int n0 = fs.klo / kTile * kTile; n0 <= fs.khi; n0 += kTile) {
    const int keys = fs.L.skv - n0;
    float s[4][4], dp[4][4];
    zero(s);
    zero(dp);
    tile::gemm_nt<T>(s, make_view(fs.q, p.q.s[2], p.q.s[3], fs.rows, p.d_qk),
                     make_view(fs.k + n0 * p.k.s[2], p.k.s[2], p.k.s[3], keys, p.d_qk),
                     static_cast<int>(p.d_qk), st.nt, tid, ty, tx);
    tile::gemm_nt<T>(dp, make_view(fs.d_o, p.d_o.s[2], p.d_o.s[3], fs.rows, p.d_v),
                     make_view(fs.v + n0 * p.v.s[2], p.v.s[2], p.v.s[3], keys, p.d_v),
                     static_cast<int>(p.d_v), st.nt, tid, ty, tx);
    probabilities<T, false>(p, fs.L, fs.b, fs.h, fs.m0 + 4 * ty, n0 + 4 * tx, s, dp, true, false);
    tile::write_x(xt, dp, ty, tx);
    tile::gemm_nn<T, 1>(
        acc, xt,
        make_view(fs.k + n0 * p.k.s[2] + fs.col0 * p.k.s[3], p.k.s[2], p.k.s[3], keys, fs.cols),
        st.nn, tid, ty, tx);
  }

  uint16_t* dqb = out_ptr(p.dq, fs.b, fs.h) + fs.L.q0 * p.dq.s[2] + fs.col0 * p.dq.s[3];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int m = fs.m0 + 4 * ty + i;
    if (m >= fs.L.q_rows) continue;  // s_q, or the slot's rows up to s_q
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = 4 * tx + j;
      if (c < fs.cols) store_elem<T>(dqb, m * p.dq.s[2] + c * p.dq.s[3], acc[i][j] * p.scale);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads, kBackwardMinBlocks)
    generic_dq_kernel(const Params p, int64_t blocks) {
  __shared__ __align__(16) BackwardStage st;
  __shared__ __align__(16) tile::XTile xt;
  __shared__ DqState fs;
  const int tid = static_cast<int>(threadIdx.x), ty = tid >> 4, tx = tid & 15;
  for (int64_t blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
    __syncthreads();
    if (tid == 0) dq_state(p, blk, fs);
    __syncthreads();
    dq_block<T>(p, fs, st, xt, tid, ty, tx);
  }
}

// ---------------------------------------------------------------------------------------
// dBias

// One (b, h) pair of a dbias block's broadcast set, decoded by thread 0.
struct DbiasState {
  const uint16_t* q;    // Q of (b, h) at row m0
  const uint16_t* d_o;  // dO of (b, h) at row m0
  const uint16_t* k;    // K of (b, h_kv) at key n0
  const uint16_t* v;    // V of (b, h_kv) at key n0
  BatchLens L;
  int b, h, rows, keys;
  bool live;  // the tile holds a visible score of (b, h)
};

__device__ __forceinline__ void dbias_state(const Params& p, int b, int h, int m0, int n0,
                                            DbiasState& fs) {
  const int hk = h / static_cast<int>(p.group);
  fs.b = b;
  fs.h = h;
  fs.L = batch_lens(p, b);
  fs.rows = min(kTile, fs.L.sq - m0);
  fs.keys = min(kTile, fs.L.skv - n0);
  fs.live = false;
  if (fs.rows > 0 && fs.keys > 0) {
    int klo, khi;
    keys_of_queries(p, fs.L, m0, m0 + fs.rows - 1, klo, khi);
    fs.live = khi >= n0 && klo <= n0 + fs.keys - 1;
  }
  fs.q = in_ptr(p.q, b, h) + (fs.L.q0 + m0) * p.q.s[2];
  fs.d_o = in_ptr(p.d_o, b, h) + (fs.L.q0 + m0) * p.d_o.s[2];
  fs.k = in_ptr(p.k, b, hk) + (fs.L.kv0 + n0) * p.k.s[2];
  fs.v = in_ptr(p.v, b, hk) + (fs.L.kv0 + n0) * p.v.s[2];
}

template <class T>
__global__ void __launch_bounds__(kThreads, kBackwardMinBlocks)
    generic_dbias_kernel(const Params p, int64_t blocks) {
  __shared__ __align__(16) tile::NtSmem st;
  __shared__ DbiasState fs;
  const int tid = static_cast<int>(threadIdx.x), ty = tid >> 4, tx = tid & 15;
  for (int64_t blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
    int64_t rest = blk;
    const int n0 = take(rest, p.n_kt) * kTile;
    const int m0 = take(rest, p.n_qt) * kTile;
    const int bh = take(rest, p.bias_h);
    const int bb = static_cast<int>(rest);
    // The (b, h) pairs this bias element is added to: all of a broadcast dim.
    const int nb = p.bias_b == 1 ? static_cast<int>(p.b) : 1;
    const int nh = p.bias_h == 1 ? static_cast<int>(p.h_q) : 1;

    float acc[4][4];
    zero(acc);
    for (int pair = 0; pair < nb * nh; ++pair) {
      __syncthreads();
      if (tid == 0) {
        const int b = p.bias_b == 1 ? pair / nh : bb;
        const int h = p.bias_h == 1 ? pair % nh : bh;
        dbias_state(p, b, h, m0, n0, fs);
      }
      __syncthreads();
      if (!fs.live) continue;
      float s[4][4], dp[4][4];
      zero(s);
      zero(dp);
      tile::gemm_nt<T>(s, make_view(fs.q, p.q.s[2], p.q.s[3], fs.rows, p.d_qk),
                       make_view(fs.k, p.k.s[2], p.k.s[3], fs.keys, p.d_qk),
                       static_cast<int>(p.d_qk), st, tid, ty, tx);
      tile::gemm_nt<T>(dp, make_view(fs.d_o, p.d_o.s[2], p.d_o.s[3], fs.rows, p.d_v),
                       make_view(fs.v, p.v.s[2], p.v.s[3], fs.keys, p.d_v), static_cast<int>(p.d_v),
                       st, tid, ty, tx);
      probabilities<T, false>(p, fs.L, fs.b, fs.h, m0 + 4 * ty, n0 + 4 * tx, s, dp, true, true);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += dp[i][j];
      }
    }

    uint16_t* db = out_ptr(p.dbias, bb, bh);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = m0 + 4 * ty + i;
      if (m >= p.s_q) continue;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int n = n0 + 4 * tx + j;
        if (n < p.s_kv) store_elem<T>(db, m * p.dbias.s[2] + n * p.dbias.s[3], acc[i][j]);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Ragged padding past the envelope

// Rows of a slot past s_q (dq) or s_kv (dk, dv), in a slot wider than the envelope: padding
// the tile grids do not reach, written 0 (DESIGN 2.1). One block per batch. The writes are
// dtype-free; T names the instantiation beside the dtype's other kernels (launch_typed).
template <class T>
__global__ void __launch_bounds__(kThreads) generic_ragged_pad_kernel(const Params p) {
  for (int64_t b = blockIdx.x; b < p.b; b += gridDim.x) {
    if (p.ragged_q) kernels::pad_slot_rows(p.rq.slot(b), p.s_q, pad_rows(p.dq, p.h_q, p.d_qk));
    if (p.ragged_kv) {
      const kernels::Slot s = p.rkv.slot(b);
      kernels::pad_slot_rows(s, p.s_kv, pad_rows(p.dk, p.h_kv, p.d_qk));
      kernels::pad_slot_rows(s, p.s_kv, pad_rows(p.dv, p.h_kv, p.d_v));
    }
  }
}

// ---------------------------------------------------------------------------------------

Status check(const char* kernel) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return Status();
  return Status(Code::device_error,
                std::string(kernel) + ": launch failed: " + cudaGetErrorString(err));
}

template <class T>
Status launch_typed(const Params& p, const Geometry& geo, cudaStream_t s) {
  if (geo.delta.blocks > 0) {
    generic_delta_kernel<T><<<geo.delta.grid, kThreads, 0, s>>>(p, geo.delta.blocks);
    if (Status st = check("generic_delta_kernel"); !st) return st;
  }
  if (geo.dsink.blocks > 0) {
    generic_dsink_kernel<<<geo.dsink.grid, kThreads, 0, s>>>(p, geo.dsink.blocks);
    if (Status st = check("generic_dsink_kernel"); !st) return st;
  }
  if (geo.dkdv.blocks > 0) {
    generic_dkdv_kernel<T><<<geo.dkdv.grid, kThreads, 0, s>>>(p, geo.dkdv.blocks);
    if (Status st = check("generic_dkdv_kernel"); !st) return st;
  }
  if (geo.dq.blocks > 0) {
    generic_dq_kernel<T><<<geo.dq.grid, kThreads, 0, s>>>(p, geo.dq.blocks);
    if (Status st = check("generic_dq_kernel"); !st) return st;
  }
  if (geo.dbias.blocks > 0) {
    generic_dbias_kernel<T><<<geo.dbias.grid, kThreads, 0, s>>>(p, geo.dbias.blocks);
    if (Status st = check("generic_dbias_kernel"); !st) return st;
  }
  if (p.ragged_q || p.ragged_kv) {
    // Disjoint rows from the tiles above (past the envelope), so no order between them.
    const unsigned grid = static_cast<unsigned>(p.b < 65535 ? p.b : 65535);
    generic_ragged_pad_kernel<T><<<grid, kThreads, 0, s>>>(p);
    if (Status st = check("generic_ragged_pad_kernel"); !st) return st;
  }
  return Status();
}

template <class T>
Status load_typed() {
  cudaFuncAttributes attr;
  const std::pair<const char*, const void*> kernels[] = {
      {"generic_delta_kernel", reinterpret_cast<const void*>(generic_delta_kernel<T>)},
      {"generic_dsink_kernel", reinterpret_cast<const void*>(generic_dsink_kernel)},
      {"generic_dkdv_kernel", reinterpret_cast<const void*>(generic_dkdv_kernel<T>)},
      {"generic_dq_kernel", reinterpret_cast<const void*>(generic_dq_kernel<T>)},
      {"generic_dbias_kernel", reinterpret_cast<const void*>(generic_dbias_kernel<T>)},
      {"generic_ragged_pad_kernel", reinterpret_cast<const void*>(generic_ragged_pad_kernel<T>)}};
  for (const auto& [name, fn] : kernels) {
    const cudaError_t err = cudaFuncGetAttributes(&attr, fn);
    if (err != cudaSuccess) {
      return Status(Code::device_error,
                    std::string(name) + ": cannot load: " + cudaGetErrorString(err));
    }
  }
  return Status();
}

}  // namespace

Status load_backward_kernels(const Geometry& geo) {
  return geo.bf16 ? load_typed<__nv_bfloat16>() : load_typed<__half>();
}

Status launch_backward(const Params& p, const Geometry& geo, Stream stream) {
  auto* s = reinterpret_cast<cudaStream_t>(stream);
  return geo.bf16 ? launch_typed<__nv_bfloat16>(p, geo, s) : launch_typed<__half>(p, geo, s);
}

}  // namespace floe::detail::generic
