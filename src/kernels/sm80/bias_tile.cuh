// The bias of one (query tile, key tile) step staged through shared memory: 16-byte cp.async
// loads issued a step ahead (the forward issues them with K's, into a pipeline stage beside K),
// then read back in the m16n8 accumulator's layout. Scalar 2-byte loads consumed at once had
// been half of the stall samples of the sm80 bias forward.
//
// A bias row is 16 bytes longer in shared memory than the tile's keys: the eight rows a warp reads
// at once (32-bit reads, four lanes a row) then fall on different banks. Bias layouts that do not
// allow 16-byte loads (a row stride or base not 16-byte aligned) keep the direct global reads of
// kernels/score_mod.cuh: add_bias; the kernel chooses per launch (`bias_vec` in the params).
// The sm80 backward also writes dBias out of a shared-memory tile (store_rows_partial).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include <cute/tensor.hpp>

#include "kernels/constants.h"

namespace floe::kernels {

// The shared memory per block of the part classes the tiles are sized for (sm_86/sm_89, A100,
// H100/H200). A bias buffer is added to a tile only where it keeps the tile in its class: a tile
// chosen for a part must still fit it with the bias.
inline constexpr int kSmemClassBytes[3] = {99 * 1024, 163 * 1024, 227 * 1024};
constexpr bool same_smem_class(int without, int with) {
  for (int limit : kSmemClassBytes) {
    if (without <= limit && with > limit) return false;
  }
  return true;
}

// 16 bytes global -> shared, of which the first `src_bytes` (0..16) are read and the rest
// zero-filled (cp.async.cg: L2 only). `src` must be a valid address even when nothing is read.
__device__ __forceinline__ void cp_async_16_partial(void* smem, const void* src, int src_bytes) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}

// kernels::cp_async_rows with partial chunks: the shared tile `dst` (static rows x cols) from the
// global tile at `base` through `thr`, one thread's slice of a 16-byte cp.async TiledCopy;
// columns from col_limit on are zero-filled and not read, also inside a chunk (a bias row need
// not end on a 16-byte boundary), and so are rows from row_limit on. base and row_stride 16-byte
// aligned; 32-bit offsets inside the tile.
template <class ThrCopy, class Element, class Dst>
__device__ __forceinline__ void cp_async_rows_partial(ThrCopy const& thr, const Element* base,
                                                      int row_stride, Dst&& dst, int row_limit,
                                                      int col_limit) {
  using namespace cute;
  const auto shape = product_each(cute::shape(dst));  // (rows, cols), static
  Tensor d = thr.partition_D(dst);
  Tensor c = thr.partition_S(make_identity_tensor(shape));
  CUTE_UNROLL
  for (int m = 0; m < size<1>(d); ++m) {
    const int row = get<0>(c(0, m, 0));
    CUTE_UNROLL
    for (int k = 0; k < size<2>(d); ++k) {
      const int col = get<1>(c(0, m, k));
      const int bytes = row < row_limit ? 2 * max(0, min(8, col_limit - col)) : 0;
      const Element* from = bytes > 0 ? base + row * row_stride + col : base;
      cp_async_16_partial(raw_pointer_cast(&d(0, m, k)), from, bytes);
    }
  }
}

// The shared tile `src` (static rows x cols) to the global tile at `base` through `thr`, one
// thread's slice of a 16-byte TiledCopy: rows from row_limit and columns from col_limit on are
// not written; a chunk that crosses col_limit is written element by element. base and
// row_stride 16-byte aligned; 32-bit offsets inside the tile.
template <class ThrCopy, class Src, class Element>
__device__ __forceinline__ void store_rows_partial(ThrCopy const& thr, Src const& src,
                                                   Element* base, int row_stride, int row_limit,
                                                   int col_limit) {
  using namespace cute;
  const auto shape = product_each(cute::shape(src));  // (rows, cols), static
  Tensor s = thr.partition_S(src);
  Tensor c = thr.partition_S(make_identity_tensor(shape));
  CUTE_UNROLL
  for (int m = 0; m < size<1>(s); ++m) {
    const int row = get<0>(c(0, m, 0));
    if (row >= row_limit) continue;
    CUTE_UNROLL
    for (int k = 0; k < size<2>(s); ++k) {
      const int col = get<1>(c(0, m, k));
      const uint4 v = *reinterpret_cast<const uint4*>(raw_pointer_cast(&s(0, m, k)));
      Element* to = base + row * row_stride + col;
      if (col + 8 <= col_limit) {
        *reinterpret_cast<uint4*>(to) = v;
      } else {
        const Element* e = reinterpret_cast<const Element*>(&v);
        CUTE_UNROLL
        for (int i = 0; i < 8; ++i) {
          if (col + i < col_limit) to[i] = e[i];
        }
      }
    }
  }
}

template <class Element, int kRows, int kCols, int kThreads>
struct Sm80BiasTile {
  static_assert(sizeof(Element) == 2, "f16 / bf16");
  static_assert(kCols % 8 == 0, "whole 16-byte chunks");
  static constexpr int kRowElems = kCols + 8;
  static constexpr int kBytes = kRows * kRowElems * 2;
  static constexpr int kChunksPerRow = kCols / 8;
  static_assert(kThreads % kChunksPerRow == 0, "each thread keeps one column of chunks");
  static constexpr int kRowsPerPass = kThreads / kChunksPerRow;
  static_assert(kRows % kRowsPerPass == 0, "the threads tile the rows");
  static constexpr int kPasses = kRows / kRowsPerPass;

  // smem <- the tile whose first element is src, rows row_stride elements apart (32-bit offsets
  // inside a tile); rows from `rows` and columns from `cols` on are zero-filled and not read.
  // src, row_stride 16-byte aligned (8 elements).
  __device__ __forceinline__ static void load(Element* smem, const Element* src, int row_stride,
                                              int rows, int cols, int tid) {
    const int c8 = (tid % kChunksPerRow) * 8;
    const int r0 = tid / kChunksPerRow;
    const int col_bytes = 2 * max(0, min(8, cols - c8));
    CUTE_UNROLL
    for (int i = 0; i < kPasses; ++i) {
      const int r = r0 + i * kRowsPerPass;
      const int bytes = r < rows ? col_bytes : 0;
      const Element* from = bytes > 0 ? src + r * row_stride + c8 : src;
      cp_async_16_partial(smem + r * kRowElems + c8, from, bytes);
    }
  }

  // s2 += bias * log2(e) from the staged tile: s and c are the row/col views of the scores and
  // of their (row, col) within the tile (kernels::acc_row_col of an m16n8 accumulator: columns
  // j and j + 1 of a row are neighbouring keys, read as one 32-bit word).
  template <class S, class C>
  __device__ __forceinline__ static void add(S&& s, C const& c, const Element* smem) {
    using namespace cute;
    static_assert(decltype(size<1>(s))::value % 2 == 0, "pairs of columns");
    CUTE_UNROLL
    for (int r = 0; r < size<0>(s); ++r) {
      const Element* row = smem + get<0>(c(r, 0)) * kRowElems;
      CUTE_UNROLL
      for (int j = 0; j < size<1>(s); j += 2) {
        const uint32_t w = *reinterpret_cast<const uint32_t*>(row + get<1>(c(r, j)));
        float lo, hi;
        if constexpr (std::is_same_v<Element, cute::bfloat16_t>) {
          lo = __uint_as_float(w << 16);
          hi = __uint_as_float(w & 0xffff0000u);
        } else {
          const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w));
          lo = f.x;
          hi = f.y;
        }
        s(r, j) += lo * kLog2e;
        s(r, j + 1) += hi * kLog2e;
      }
    }
  }
};

}  // namespace floe::kernels
