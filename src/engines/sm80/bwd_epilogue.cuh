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

template <class T, class AccDK, class AccDV>
__device__ __forceinline__ void bwd_epilogue(const BwdParams& p, char* smem, int tid,
                                             const BwdBlock& blk, AccDK& acc_dk, AccDV& acc_dv) {
  using Element = typename T::Element;
  cute::cp_async_wait<0>();
  __syncthreads();  // every warp is done with K and V
  const int rows = p.s_kv - blk.n0;
  Element* dk = static_cast<Element*>(p.dk) + blk.b * p.dk_strides.b + blk.h_kv * p.dk_strides.h +
                static_cast<int64_t>(blk.n0) * p.dk_strides.s;
  Element* dv = static_cast<Element*>(p.dv) + blk.b * p.dv_strides.b + blk.h_kv * p.dv_strides.h +
                static_cast<int64_t>(blk.n0) * p.dv_strides.s;
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
