// generic forward: one logical block per (b, h_q, tile of 64 query rows, chunk of O columns).
// K and V tiles of 64 keys pass through shared memory; scores and O accumulate in fp32
// registers (4 x 4 scores and 4 x 4NJ outputs a thread) with an online softmax in base 2.
// No atomics: every output element is written by exactly one thread, in a fixed order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "engines/generic/generic_common.cuh"
#include "engines/generic/generic_kernels.h"
#include "engines/generic/generic_tile_gemm.cuh"

namespace floe::detail::generic {
namespace {

template <int NJ>
union ForwardStage {
  tile::NtSmem nt;      // Q and K chunks while scores accumulate
  tile::NnSmem<NJ> nn;  // V chunks while O accumulates
};

// What a logical block works on, decoded once by thread 0 into shared memory. The tile loop
// re-reads it after its barriers instead of holding it in registers: the registers go to the
// accumulators (2 blocks of 256 threads an SM leave 128 a thread).
struct ForwardState {
  const uint16_t* q;  // Q of (b, h) at row m0
  const uint16_t* k;  // K of (b, h_kv) (paged: of head h_kv in page 0)
  const uint16_t* v;  // V of (b, h_kv) at column col0 (paged: in page 0)
  BatchLens L;
  int b, h, m0, rows, chunk, col0, cols;
  int lo, hi;  // keys that any valid row of the tile can see
};

template <int NJ>
__device__ __forceinline__ void forward_state(const Params& p, int64_t blk, ForwardState& fs) {
  constexpr int kCols = 64 * NJ;
  fs.chunk = take(blk, p.fwd_nc);
  fs.m0 = take(blk, p.n_qt) * kTile;
  fs.h = take(blk, p.h_q);
  fs.b = static_cast<int>(blk);
  const int hk = fs.h / static_cast<int>(p.group);
  fs.L = batch_lens(p, fs.b);
  fs.rows = min(kTile, fs.L.sq - fs.m0);  // valid query rows of the tile (may be <= 0)
  fs.col0 = fs.chunk * kCols;
  fs.cols = min(kCols, static_cast<int>(p.d_v) - fs.col0);
  fs.q = in_ptr(p.q, fs.b, fs.h) + (fs.L.q0 + fs.m0) * p.q.s[2];
  if (p.paged_kv) {  // [page, row, head, d]: the tile's page is added per tile
    fs.k = static_cast<const uint16_t*>(p.k.ptr) + hk * p.k.s[2];
    fs.v = static_cast<const uint16_t*>(p.v.ptr) + hk * p.v.s[2] + fs.col0 * p.v.s[3];
  } else {
    fs.k = in_ptr(p.k, fs.b, hk) + fs.L.kv0 * p.k.s[2];
    fs.v = in_ptr(p.v, fs.b, hk) + fs.L.kv0 * p.v.s[2] + fs.col0 * p.v.s[3];
  }
  fs.lo = 0;
  fs.hi = -1;
  if (fs.rows > 0) keys_of_queries(p, fs.L, fs.m0, fs.m0 + fs.rows - 1, fs.lo, fs.hi);
}

// A paged tile: the offsets of keys n0 .. n0 + 63 from K's and V's head base (rows[0, 64) for
// K, rows[64, 128) for V), one thread a key. Keys past the length are never addressed.
__device__ __forceinline__ void page_rows(const Params& p, const ForwardState& fs, int n0,
                                          int64_t* rows, int tid) {
  if (tid < kTile) {
    const int j = n0 + tid;
    int64_t ko = 0, vo = 0;
    if (j < fs.L.skv) {
      const int64_t page = p.pages.page(fs.b, j), r = j % p.pages.page_size;
      ko = page * p.k.s[0] + r * p.k.s[1];
      vo = page * p.v.s[0] + r * p.v.s[1];
    }
    rows[tid] = ko;
    rows[kTile + tid] = vo;
  }
}

// Paged: K and V rows come from the block table, a tile's 64 row offsets staged in `rows`.
template <class T, int NJ, bool Paged>
__device__ __forceinline__ void forward_block(const Params& p, const ForwardState& fs,
                                              ForwardStage<NJ>& st, tile::XTile& xt, int64_t* rows,
                                              int tid, int ty, int tx) {
  float acc[4][4 * NJ];
  float m_run[4], l_run[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m_run[i] = -INFINITY;
    l_run[i] = 0.f;
#pragma unroll
    for (int c = 0; c < 4 * NJ; ++c) acc[i][c] = 0.f;
  }

  for (int n0 = fs.lo / kTile * kTile; n0 <= fs.hi; n0 += kTile) {
    float s[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) s[i][j] = 0.f;
    }
    const View2D qv = make_view(fs.q, p.q.s[2], p.q.s[3], fs.rows, p.d_qk);
    if constexpr (Paged) {
      // The previous tile's last reader of rows passed the barrier ending its gemm_nn.
      page_rows(p, fs, n0, rows, tid);
      __syncthreads();
      tile::gemm_nt<T, true>(s, qv, make_row_view(fs.k, rows, p.k.s[3], fs.L.skv - n0, p.d_qk),
                             static_cast<int>(p.d_qk), st.nt, tid, ty, tx);
    } else {
      tile::gemm_nt<T>(s, qv,
                       make_view(fs.k + n0 * p.k.s[2], p.k.s[2], p.k.s[3], fs.L.skv - n0, p.d_qk),
                       static_cast<int>(p.d_qk), st.nt, tid, ty, tx);
    }

    // Scores -> base-2 logits (masked: -inf) -> online softmax; P replaces s.
    const BatchLens L = fs.L;
    const int b = fs.b, h = fs.h;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int qi = fs.m0 + 4 * ty + i;
      int klo, khi;
      row_window(p, L, qi, klo, khi);
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int kj = n0 + 4 * tx + j;
        float t = -INFINITY;
        if (kj >= klo && kj <= khi) {
          float th;
          t = logit2(p, s[i][j], bias_at<T>(p, b, h, qi, kj), th);
        }
        s[i][j] = t;
        mx = fmaxf(mx, t);
      }
      mx = tile::row_max16(mx);
      const float m_new = fmaxf(m_run[i], mx);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      const float alpha = exp2f(m_run[i] - m_use);
      float rs = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s[i][j] = exp2f(s[i][j] - m_use);
        rs += s[i][j];
      }
      l_run[i] = fmaf(l_run[i], alpha, rs);
#pragma unroll
      for (int c = 0; c < 4 * NJ; ++c) acc[i][c] *= alpha;
      m_run[i] = m_new;
    }
    tile::write_x(xt, s, ty, tx);
    if constexpr (Paged) {
      tile::gemm_nn<T, NJ, true>(
          acc, xt, make_row_view(fs.v, rows + kTile, p.v.s[3], fs.L.skv - n0, fs.cols), st.nn, tid,
          ty, tx);
    } else {
      tile::gemm_nn<T, NJ>(
          acc, xt, make_view(fs.v + n0 * p.v.s[2], p.v.s[2], p.v.s[3], fs.L.skv - n0, fs.cols),
          st.nn, tid, ty, tx);
    }
  }

  // Finalize: fold in the sink, normalise, write O (and stats from the first column chunk).
  const int b = fs.b, h = fs.h;
  const float sink2 = p.has_sink ? sink_at(p, h) * kLog2e : -INFINITY;
  uint16_t* ob = out_ptr(p.o, b, h) + fs.L.q0 * p.o.s[2] + fs.col0 * p.o.s[3];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int qi = fs.m0 + 4 * ty + i;
    const float l = tile::row_sum16(l_run[i]);
    float factor = 0.f, lse = -INFINITY;
    const bool valid = qi < fs.L.sq;
    if (valid) {  // padded rows: O = 0, stats = -inf, sink or not
      // NaN must survive to O and stats (DESIGN 2): fmaxf drops a NaN sink, so the max is a
      // compare that keeps it, and a NaN score (dropped by the tile max) shows as l = NaN.
      const float mx = m_run[i];
      const float M = mx > sink2 ? mx : sink2;
      if (M != -INFINITY || l != l) {
        const float keep = exp2f(mx - M);
        const float denom = fmaf(l, keep, p.has_sink ? exp2f(sink2 - M) : 0.f);
        factor = keep / denom;
        lse = (M + log2f(denom)) * kLn2;
      }
    }
    if (qi < fs.L.q_rows) {  // s_q, or the slot's rows (padding too) up to s_q
#pragma unroll
      for (int jj = 0; jj < NJ; ++jj) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int c = 64 * jj + 4 * tx + j;
          if (c < fs.cols) {
            // A select for padded rows: 0 * a NaN that V brought in would be NaN.
            store_elem<T>(ob, qi * p.o.s[2] + c * p.o.s[3],
                          valid ? acc[i][4 * jj + j] * factor : 0.f);
          }
        }
      }
      if (p.has_stats && fs.chunk == 0 && tx == 0) {
        static_cast<float*>(
            p.stats.ptr)[b * p.stats.s[0] + h * p.stats.s[1] + (fs.L.q0 + qi) * p.stats.s[2]] = lse;
      }
    }
  }
}

template <class T, int NJ, bool Paged>
__global__ void __launch_bounds__(kThreads, 2)
    generic_forward_kernel(const Params p, int64_t blocks) {
  __shared__ __align__(16) ForwardStage<NJ> st;
  __shared__ __align__(16) tile::XTile xt;
  __shared__ ForwardState fs;
  __shared__ int64_t rows[Paged ? 2 * kTile : 1];
  const int tid = static_cast<int>(threadIdx.x), ty = tid >> 4, tx = tid & 15;
  for (int64_t blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
    __syncthreads();  // the previous block's readers of fs are done
    if (tid == 0) forward_state<NJ>(p, blk, fs);
    __syncthreads();
    forward_block<T, NJ, Paged>(p, fs, st, xt, rows, tid, ty, tx);
  }
}

// A ragged query side: rows of a slot past s_q (a slot wider than the envelope) are padding
// that the tiles above do not reach: O = 0, stats = -inf (DESIGN 2.1). One block per batch.
template <class T>
__global__ void __launch_bounds__(kThreads) generic_ragged_pad_kernel(const Params p) {
  kernels::PadRows o = pad_rows(p.o, p.h_q, p.d_v);
  if (p.has_stats) {
    o.stats = static_cast<float*>(p.stats.ptr);
    o.stats_head_stride = p.stats.s[1];
    o.stats_row_stride = p.stats.s[2];
  }
  for (int64_t b = blockIdx.x; b < p.b; b += gridDim.x) {
    kernels::pad_slot_rows(p.rq.slot(b), p.s_q, o);
  }
}

using ForwardKernel = void (*)(const Params, int64_t);

// The instantiation a plan runs: O in 128-column chunks when the plan chose them.
template <class T, bool Paged>
ForwardKernel forward_kernel(const Params& p) {
  return p.fwd_cols == 128 ? generic_forward_kernel<T, 2, Paged>
                           : generic_forward_kernel<T, 1, Paged>;
}

template <class T>
ForwardKernel forward_kernel(const Params& p) {
  return p.paged_kv ? forward_kernel<T, true>(p) : forward_kernel<T, false>(p);
}

ForwardKernel forward_kernel(const Params& p, bool bf16) {
  return bf16 ? forward_kernel<__nv_bfloat16>(p) : forward_kernel<__half>(p);
}

}  // namespace

// __CUDA_ARCH_LIST__: the architectures nvcc compiles this file for (e.g. 800, 900).
bool kernels_built_for(int arch) {
#ifdef __CUDA_ARCH_LIST__
  constexpr int kList[] = {__CUDA_ARCH_LIST__};
  for (int a : kList) {
    if (arch / 10 == a / 100 && arch % 10 >= (a / 10) % 10) return true;
  }
  return false;
#else
  return arch >= 80;
#endif
}

std::string built_archs() {
  std::string out;
#ifdef __CUDA_ARCH_LIST__
  constexpr int kList[] = {__CUDA_ARCH_LIST__};
  for (int a : kList) out += (out.empty() ? "sm_" : ", sm_") + std::to_string(a / 10);
#endif
  return out;
}

Status load_forward_kernels(const Params& p, const Geometry& geo) {
  cudaFuncAttributes attr;
  const cudaError_t err = cudaFuncGetAttributes(&attr, forward_kernel(p, geo.bf16));
  if (err != cudaSuccess) {
    return Status(Code::device_error,
                  std::string("generic_forward_kernel: cannot load: ") + cudaGetErrorString(err));
  }
  return Status();
}

Status launch_forward(const Params& p, const Geometry& geo, Stream stream) {
  if (geo.forward.blocks == 0) return Status();
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  forward_kernel(p, geo.bf16)<<<geo.forward.grid, kThreads, 0, s>>>(p, geo.forward.blocks);
  if (p.ragged_q) {
    // Disjoint rows from the tiles above (t >= start + s_q), so no order between them.
    const unsigned grid = static_cast<unsigned>(p.b < 65535 ? p.b : 65535);
    if (geo.bf16) {
      generic_ragged_pad_kernel<__nv_bfloat16><<<grid, kThreads, 0, s>>>(p);
    } else {
      generic_ragged_pad_kernel<__half><<<grid, kThreads, 0, s>>>(p);
    }
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return Status(Code::device_error,
                  std::string("generic_forward_kernel: launch failed: ") + cudaGetErrorString(err));
  }
  return Status();
}

}  // namespace floe::detail::generic
