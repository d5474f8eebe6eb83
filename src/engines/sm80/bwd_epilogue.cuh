// sm80 backward: the end of one main-kernel CTA. dK = scale * acc_dk and dV = acc_dv go through
// shared memory (K's and V's buffers, free now) and out with 16-byte stores through their
// strides; rows past the batch's key length hold zeros (their P and dS were 0). With a bias
// gradient, the rows of query tiles the CTA never visited get dBias = 0 for its keys.
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm80/bwd_params.h"
#include "kernels/band_tiles.cuh"
#include "kernels/sm80/fragment.cuh"

namespace floe::detail::sm80 {

// Rows [first, first + n) of a [T, d] slice (row_stride apart, d a multiple of 8): zeros, 16
// bytes a thread. A ragged slot's rows past the envelope, which no tile covers.
template <class Element, int kThreads>
__device__ __forceinline__ void zero_rows(Element* base, int64_t row_stride, int64_t first, int n,
                                          int d, int tid) {
  const int chunks = d / 8;
  for (int64_t x = tid; x < static_cast<int64_t>(n) * chunks; x += kThreads) {
    *reinterpret_cast<uint4*>(base + (first + x / chunks) * row_stride + (x % chunks) * 8) =
        make_uint4(0, 0, 0, 0);
  }
}

template <class T, int kRows, int kCols, class SmemLayout, class Acc>
__device__ __forceinline__ void bwd_store_rows(Acc& acc, float factor, char* smem_at, int tid,
                                               void* out, int64_t row_stride, int rows, int cols) {
  using namespace cute;
  using Element = typename T::Element;
  typename T::TiledMmadKV mma;
  CUTE_UNROLL
  for (int i = 0; i < size(acc); ++i) acc(i) *= factor;
  Tensor r = kernels::convert_fragment<Element>(acc);
  Tensor s = make_tensor(make_smem_ptr(reinterpret_cast<Element*>(smem_at)), SmemLayout{});
  auto c_copy = make_tiled_copy_C(typename T::SmemStoreAtom{}, mma);
  auto c_thr = c_copy.get_thread_slice(tid);
  copy(c_copy, c_thr.retile_S(r), c_thr.partition_D(s));
  __syncthreads();
  using Shape = cute::Shape<Int<kRows>, Int<kCols>>;
  Tensor g = make_tensor(make_gmem_ptr(static_cast<Element*>(out)),
                         make_layout(Shape{}, make_stride(static_cast<int>(row_stride), _1{})));
  typename T::GmemStore gmem_store;
  auto gthr = gmem_store.get_thread_slice(tid);
  Tensor ts = gthr.partition_S(s);
  Tensor tg = gthr.partition_D(g);
  Tensor tc = gthr.partition_D(make_identity_tensor(Shape{}));
  CUTE_UNROLL
  for (int m = 0; m < size<1>(tg); ++m) {
    if (get<0>(tc(0, m, 0)) < rows) {
      CUTE_UNROLL
      for (int k = 0; k < size<2>(tg); ++k) {
        if (get<1>(tc(0, m, k)) < cols) copy(gmem_store, ts(_, m, k), tg(_, m, k));
      }
    }
  }
}

// kServing: a ragged key side's rows start at blk.kv0 and end with its slot (at most s_kv); the
// last key tile also zeroes the slot's rows past the envelope (DESIGN 2.1: key padding).
template <class T, bool kServing, class AccDK, class AccDV>
__device__ __forceinline__ void bwd_epilogue(const BwdParams& p, char* smem, int tid,
                                             const BwdBlock& blk, AccDK& acc_dk, AccDV& acc_dv) {
  using Element = typename T::Element;
  cute::cp_async_wait<0>();
  __syncthreads();  // every warp is done with K and V
  const int rows = (kServing ? blk.kv_rows : p.s_kv) - blk.n0;
  const int64_t kv0 = kServing ? blk.kv0 : 0;
  Element* dk = static_cast<Element*>(p.dk) + blk.b * p.dk_strides.b + blk.h_kv * p.dk_strides.h +
                (kv0 + blk.n0) * p.dk_strides.s;
  Element* dv = static_cast<Element*>(p.dv) + blk.b * p.dv_strides.b + blk.h_kv * p.dv_strides.h +
                (kv0 + blk.n0) * p.dv_strides.s;
  if constexpr (kServing) {
    if (blk.kv_slot > p.s_kv && blk.n0 + T::kBlockN >= p.s_kv) {
      zero_rows<Element, T::kThreads>(static_cast<Element*>(p.dk) + blk.h_kv * p.dk_strides.h,
                                      p.dk_strides.s, blk.kv0 + p.s_kv, blk.kv_slot - p.s_kv,
                                      p.d_qk, tid);
      zero_rows<Element, T::kThreads>(static_cast<Element*>(p.dv) + blk.h_kv * p.dv_strides.h,
                                      p.dv_strides.s, blk.kv0 + p.s_kv, blk.kv_slot - p.s_kv, p.d_v,
                                      tid);
    }
  }
  bwd_store_rows<T, T::kBlockN, T::kDqk, typename T::SmemLayoutK>(
      acc_dk, p.scale, smem + T::kOffK, tid, dk, p.dk_strides.s, rows, p.d_qk);
  bwd_store_rows<T, T::kBlockN, T::kDv, typename T::SmemLayoutV>(acc_dv, 1.f, smem + T::kOffV, tid,
                                                                 dv, p.dv_strides.s, rows, p.d_v);
}

// dBias = 0 where no visit wrote it: the CTA's keys (up to s_kv) against the rows of the query
// tiles outside [qt.begin, qt.end), for every query head of its group.
template <class T>
__device__ __forceinline__ void bwd_zero_unvisited_dbias(const BwdParams& p, int tid,
                                                         const BwdBlock& blk,
                                                         const kernels::QueryTiles& qt) {
  using Element = typename T::Element;
  const int cols = min(T::kBlockN, p.s_kv - blk.n0);
  const int lo_end = qt.empty() ? p.s_q : min(qt.begin * T::kBlockM, p.s_q);
  const int hi_begin = qt.empty() ? p.s_q : min(qt.end * T::kBlockM, p.s_q);
  const int rows = lo_end + (p.s_q - hi_begin);
  for (int g = 0; g < p.group; ++g) {
    const int h = blk.h_kv * p.group + g;
    Element* base =
        static_cast<Element*>(p.dbias) + blk.b * p.dbias_strides.b + h * p.dbias_strides.h + blk.n0;
    for (int64_t x = tid; x < static_cast<int64_t>(rows) * cols; x += T::kThreads) {
      int row = static_cast<int>(x / cols);
      const int col = static_cast<int>(x % cols);
      if (row >= lo_end) row = hi_begin + (row - lo_end);
      base[row * p.dbias_strides.s + col] = Element(0.f);
    }
  }
}

}  // namespace floe::detail::sm80
