// fp32 register-tiled GEMM building blocks for 256-thread blocks (CUDA cores, no tensor
// cores), used by the generic engine. CUDA-only header.
//
// Thread layout: tid = 16 * ty + tx (ty, tx in [0, 16)). A 64 x W output tile gives thread
// (ty, tx) rows 4ty..4ty+3 and columns 64jj + 4tx..4tx+3 (jj < W / 64): the 16 threads that
// share a row are 16 consecutive lanes of one warp, so row reductions are 4 xor-shuffles.
//
// Shared-memory tiles are fp32 [NO][NI + 4] ("outer" x "inner", rows padded by 4 floats),
// the outer index being the reduction index of the GEMM that reads them. The GEMMs read
// float4 groups at [thread base + immediate], so no per-row address registers; the padding
// makes both staging patterns of Stager free of bank conflicts.
#pragma once

#include <cstdint>

#include "engines/generic/strided_view.cuh"

namespace floe::detail::tile {

inline constexpr int kThreads = 256;
inline constexpr int kTile = 64;   // rows and columns of a score tile
inline constexpr int kChunk = 32;  // reduction depth staged at a time

// Row pitch (floats) of a shared tile with NI inner positions.
template <int NI>
inline constexpr int kPitch = NI + 4;

// An opaque copy of x: keeps the compiler from hoisting per-element address arithmetic out
// of the chunk loops (that costs dozens of registers); it is recomputed where it is used.
__device__ __forceinline__ int64_t opaque(int64_t x) {
  int64_t y;
  asm volatile("mov.b64 %0, %1;" : "=l"(y) : "l"(x));
  return y;
}

// Moves an NO x NI window of a strided tensor into a shared tile through registers, so that
// the global loads of the next stage overlap the arithmetic on the current one.
// Element (o, i) is p[o * so + i * si]; it is valid when o < o_lim and i < i_lim, and reads
// as 0 otherwise (never addressed). i_fast picks the mapping of lanes to elements:
//   i_fast:  a warp covers 32 consecutive i of one o (coalesced when si is the small stride);
//   o-fast:  a warp covers 8 consecutive o by 4 consecutive i (coalesced when so is).
template <class T, int NO, int NI>
struct Stager {
  static_assert(NI % 32 == 0 && NI <= kThreads && NO % 8 == 0, "tile shape");
  static constexpr int E = NO * NI / kThreads;  // elements per thread
  static_assert(E * kThreads == NO * NI && E % 2 == 0, "tile shape");
  static constexpr int OSTEP = kThreads / NI;  // i_fast: o step between a thread's elements
  static constexpr int OGROUPS = NO / 8;       // o-fast: groups of 8 outer rows

  uint32_t raw[E / 2];  // two raw elements a register: element 2k low half, 2k + 1 high

  __device__ __forceinline__ void put(int e, uint16_t v) {
    if (e % 2 == 0) {
      raw[e / 2] = v;
    } else {
      raw[e / 2] |= static_cast<uint32_t>(v) << 16;
    }
  }
  __device__ __forceinline__ float get(int e) const {
    const uint32_t r = raw[e / 2];
    return Elem<T>::to_float(static_cast<uint16_t>(e % 2 == 0 ? r : r >> 16));
  }

  __device__ __forceinline__ void load(const uint16_t* __restrict__ p, int64_t so, int64_t si,
                                       int o_lim, int i_lim, bool i_fast, int tid) {
    so = opaque(so);
    si = opaque(si);
    if (i_fast) {
      const int i = tid % NI, o = tid / NI;
      const uint16_t* q = p + o * so + i * si;
      const bool iv = i < i_lim;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const bool ok = iv && (o + e * OSTEP) < o_lim;
        put(e, ok ? load_raw(q + static_cast<int64_t>(e * OSTEP) * so) : uint16_t(0));
      }
    } else {
      const int lane = tid & 31, w = tid >> 5;
      const int o = lane & 7, i = 4 * w + (lane >> 3);
      const uint16_t* q = p + o * so + i * si;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int oo = o + 8 * (e % OGROUPS), ii = i + 32 * (e / OGROUPS);
        const bool ok = oo < o_lim && ii < i_lim;
        put(e, ok ? load_raw(q + static_cast<int64_t>(8 * (e % OGROUPS)) * so +
                             static_cast<int64_t>(32 * (e / OGROUPS)) * si)
                  : uint16_t(0));
      }
    }
  }

  // As load(), with the rows of the window at p + row[r] (a paged tile): rows are the inner
  // index (rows_inner: element (o, i) at p + o * so + row[i]) or the outer one (element
  // (o, i) at p + row[o] + i * si).
  __device__ __forceinline__ void load_rows(const uint16_t* __restrict__ p, const int64_t* row,
                                            int64_t stride, int o_lim, int i_lim, bool rows_inner,
                                            bool i_fast, int tid) {
    stride = opaque(stride);
    auto at = [&](int o, int i) -> const uint16_t* {
      return rows_inner ? p + o * stride + row[i] : p + row[o] + i * stride;
    };
    if (i_fast) {
      const int i = tid % NI, o = tid / NI;
      const bool iv = i < i_lim;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int oo = o + e * OSTEP;
        put(e, iv && oo < o_lim ? load_raw(at(oo, i)) : uint16_t(0));
      }
    } else {
      const int lane = tid & 31, w = tid >> 5;
      const int o = lane & 7, i = 4 * w + (lane >> 3);
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int oo = o + 8 * (e % OGROUPS), ii = i + 32 * (e / OGROUPS);
        put(e, oo < o_lim && ii < i_lim ? load_raw(at(oo, ii)) : uint16_t(0));
      }
    }
  }

  __device__ __forceinline__ void store(float* s, bool i_fast, int tid) const {
    if (i_fast) {
      const int i = tid % NI, o = tid / NI;
#pragma unroll
      for (int e = 0; e < E; ++e) s[(o + e * OSTEP) * kPitch<NI> + i] = get(e);
    } else {
      const int lane = tid & 31, w = tid >> 5;
      const int o = lane & 7, i = 4 * w + (lane >> 3);
#pragma unroll
      for (int e = 0; e < E; ++e) {
        s[(o + 8 * (e % OGROUPS)) * kPitch<NI> + i + 32 * (e / OGROUPS)] = get(e);
      }
    }
  }
};

// acc[i][j] += sum_d A[d][4ty + i] * B[d][4tx + j] over one staged chunk.
__device__ __forceinline__ void mma_nt_chunk(float (&acc)[4][4], const float* sa, const float* sb,
                                             int ty, int tx) {
#pragma unroll
  for (int d = 0; d < kChunk; ++d) {
    const float4 a = *reinterpret_cast<const float4*>(sa + d * kPitch<kTile> + 4 * ty);
    const float4 b = *reinterpret_cast<const float4*>(sb + d * kPitch<kTile> + 4 * tx);
    const float av[4] = {a.x, a.y, a.z, a.w};
    const float bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
  }
}

// Shared memory for one NT product: the two staged operands.
struct NtSmem {
  float a[kChunk * kPitch<kTile>];
  float b[kChunk * kPitch<kTile>];
};

// acc[i][j] += sum_{d < depth} A(4ty + i, d) * B(4tx + j, d): the 64 x 64 tile of A B^T.
// A and B are row windows (row r, column d); rows past their window and d >= depth read 0.
// B's next chunk is fetched into registers while the current one is multiplied; A's is
// fetched after the barrier: callers pass as A the operand that stays the same across their
// loop (it is then an L1 hit), which saves the registers of a second prefetch.
// Ends with a barrier, so the caller may reuse the shared memory at once.
// kRowsB: B's rows come from B.row (a paged tile); the o-fast mapping then keeps a warp on
// 8 consecutive d of 4 rows.
template <class T, bool kRowsB = false>
__device__ __forceinline__ void gemm_nt(float (&acc)[4][4], const View2D& A, const View2D& B,
                                        int depth, NtSmem& sm, int tid, int ty, int tx) {
  Stager<T, kChunk, kTile> sb;
  // Outer = d (stride cs), inner = row (stride rs).
  const bool a_if = A.rs < A.cs, b_if = kRowsB ? false : B.rs < B.cs;
  auto load_b = [&](int d0) {
    if constexpr (kRowsB) {
      sb.load_rows(B.ptr + d0 * B.cs, B.row, B.cs, depth - d0, B.rows, true, b_if, tid);
    } else {
      sb.load(B.ptr + d0 * B.cs, B.cs, B.rs, depth - d0, B.rows, b_if, tid);
    }
  };
  load_b(0);
  {
    Stager<T, kChunk, kTile> sa;
    sa.load(A.ptr, A.cs, A.rs, depth, A.rows, a_if, tid);
    sa.store(sm.a, a_if, tid);
  }
  sb.store(sm.b, b_if, tid);
  __syncthreads();
  for (int d0 = 0; d0 < depth; d0 += kChunk) {
    const int next = d0 + kChunk;
    const bool more = next < depth;
    if (more) load_b(next);
    mma_nt_chunk(acc, sm.a, sm.b, ty, tx);
    __syncthreads();
    if (more) {
      Stager<T, kChunk, kTile> sa;
      sa.load(A.ptr + next * A.cs, A.cs, A.rs, depth - next, A.rows, a_if, tid);
      sa.store(sm.a, a_if, tid);
      sb.store(sm.b, b_if, tid);
      __syncthreads();
    }
  }
}

// The 64 x 64 operand X of an NN product, [k][row], written from registers.
struct XTile {
  float x[kTile * kPitch<kTile>];
};

// Writes the thread's 4 x 4 register tile v (rows 4ty + i, columns 4tx + j of a 64 x 64
// tile) into X as X[k = column][row]: the column index becomes the reduction index.
// The caller must know that every earlier reader of X has passed a barrier.
__device__ __forceinline__ void write_x(XTile& xt, const float (&v)[4][4], int ty, int tx) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int k = 4 * tx + j;
    *reinterpret_cast<float4*>(xt.x + k * kPitch<kTile> + 4 * ty) =
        make_float4(v[0][j], v[1][j], v[2][j], v[3][j]);
  }
}

template <int NJ>
struct NnSmem {
  float y[kChunk * kPitch<kTile * NJ>];
};

// acc[i][64jj + 4tx + j] += sum_k X[k][4ty + i] * Y(k, 64jj + 4tx + j) for k < 64, where Y is
// a row window (row k, column c) of a strided tensor: rows past Y.rows and columns past
// Y.cols read 0. X must have been written (write_x) by every thread before the call; the
// first barrier inside publishes it. Ends with a barrier. Rows of X at k >= Y.rows must hold
// finite values (they meet zero rows of Y; rows k >= 32 are skipped when Y.rows <= 32).
// sm.y may alias other shared memory whose last readers passed a barrier.
// kRowsY: Y's rows come from Y.row (a paged tile); the i-fast mapping then keeps a warp on
// 32 consecutive columns of one row.
template <class T, int NJ, bool kRowsY = false>
__device__ __forceinline__ void gemm_nn(float (&acc)[4][4 * NJ], const XTile& xt, const View2D& Y,
                                        NnSmem<NJ>& sm, int tid, int ty, int tx) {
  constexpr int NI = kTile * NJ;
  Stager<T, kChunk, NI> sy;
  // outer = k (stride rs), inner = column (stride cs)
  const bool y_if = kRowsY ? true : Y.cs < Y.rs;
  const int nk = Y.rows > kChunk ? 2 : 1;
  auto load_y = [&](int k0) {
    if constexpr (kRowsY) {
      sy.load_rows(Y.ptr, Y.row + k0, Y.cs, Y.rows - k0, Y.cols, false, y_if, tid);
    } else {
      sy.load(Y.ptr + k0 * Y.rs, Y.rs, Y.cs, Y.rows - k0, Y.cols, y_if, tid);
    }
  };
  load_y(0);
  sy.store(sm.y, y_if, tid);
  __syncthreads();
  for (int kc = 0; kc < nk; ++kc) {
    const bool more = kc + 1 < nk;
    if (more) load_y(kChunk);
    const float* xk = xt.x + kc * kChunk * kPitch<kTile> + 4 * ty;
#pragma unroll 8
    for (int kk = 0; kk < kChunk; ++kk) {
      const float4 a = *reinterpret_cast<const float4*>(xk + kk * kPitch<kTile>);
      const float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
      for (int jj = 0; jj < NJ; ++jj) {
        const float4 b =
            *reinterpret_cast<const float4*>(sm.y + kk * kPitch<NI> + 64 * jj + 4 * tx);
        const float bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            acc[i][4 * jj + j] = fmaf(av[i], bv[j], acc[i][4 * jj + j]);
          }
        }
      }
    }
    __syncthreads();
    if (more) {
      sy.store(sm.y, y_if, tid);
      __syncthreads();
    }
  }
}

// Max / sum over the 16 lanes that share a row (xor within an aligned half-warp).
__device__ __forceinline__ float row_max16(float v) {
#pragma unroll
  for (int m = 1; m < 16; m <<= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}
__device__ __forceinline__ float row_sum16(float v) {
#pragma unroll
  for (int m = 1; m < 16; m <<= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

}  // namespace floe::detail::tile
