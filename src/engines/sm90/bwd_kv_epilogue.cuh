// sm90 backward: dK and dV out of the consumers' accumulators, for both main kernels. Once every
// consumer is past its last product (K and V are dead), the accumulators go to shared memory over
// the K and V tiles with stmatrix, in their 128-byte-swizzled layout, and leave in 16-byte stores,
// a warp writing whole 128-byte row pieces (FA4 stages them too, then TMA-stores them). Against
// each thread storing its registers 4 bytes at a time (8 rows x 16 bytes a warp instruction):
// 0.75-0.92x the backward's time at S 512-2k, every head dim (H200, session 14, cdd03a4).
// Rows at or past s_kv are not written; rows past a batch's length hold zeros (their K and V rows
// were zeroed, so dS and P were 0 there).
#pragma once

#include <cstdint>

#include <cutlass/arch/barrier.h>
#include <cute/tensor.hpp>

#include "engines/sm90/bwd_params.h"
#include "engines/sm90/bwd_producer.cuh"

namespace floe::detail::sm90::bwd {

// The rows [0, rows) of a [kCols / 64][kRows][64] SW128 tile to dst (row stride `stride`
// elements), 16 bytes a thread and step; every consumer thread calls it after the tile is written
// and synced.
template <int kRows, int kCols, int kThreads, class Element>
__device__ __forceinline__ void store_swizzled_rows(const Element* tile, Element* dst,
                                                    int64_t stride, int rows, int ctid) {
  constexpr int kPieces = kCols / 8;  // 16-byte pieces a row
  const uint4* src = reinterpret_cast<const uint4*>(tile);
  for (int i = ctid; i < kRows * kPieces; i += kThreads) {
    const int row = i / kPieces, piece = i % kPieces;
    if (row >= rows) break;  // i grows with the row
    const int chunk = piece / 8, p = piece % 8;
    *reinterpret_cast<uint4*>(dst + row * stride + piece * 8) =
        src[(chunk * kRows + row) * 8 + (p ^ (row % 8))];
  }
}

// acc (an accumulator of `mma`, this thread's part of the tile) times `scale`, rounded, into the
// SW128 smem tile `smem` of layout SmemLayout (the tile's own shape) with stmatrix.
template <class Element, class SmemLayout, class Mma, class Acc>
__device__ __forceinline__ void stage_accumulator(const Mma& mma, const Acc& acc, float scale,
                                                  Element* smem, int ctid) {
  using namespace cute;
  Tensor r = make_tensor<Element>(acc.layout());
  CUTE_UNROLL
  for (int i = 0; i < size(acc); ++i) r(i) = static_cast<Element>(acc(i) * scale);
  auto r2s = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, Element>{}, mma);
  auto thr = r2s.get_thread_slice(ctid);
  Tensor s = as_position_independent_swizzle_tensor(make_tensor(make_smem_ptr(smem), SmemLayout{}));
  cute::copy(r2s, thr.retile_S(r), thr.partition_D(s));
}

// The whole epilogue: every consumer past its last product (K and V are dead), dK (times scale)
// over the K tile and dV over the V tile, then both out to rows [n0, s_kv). mma_dk and mma_dv are
// the MMAs whose accumulators acc_dk and acc_dv are (the same one where d_v = d).
template <class T, class Storage, class MmaK, class AccK, class MmaV, class AccV, class Element>
__device__ __forceinline__ void store_dk_dv(const BwdParams& p, Storage& ss, const MmaK& mma_dk,
                                            const AccK& acc_dk, const MmaV& mma_dv,
                                            const AccV& acc_dv, Element* dk, Element* dv, int n0,
                                            int ctid) {
  cutlass::arch::NamedBarrier::sync(T::kConsumerThreads, kConsumersBarrier);
  stage_accumulator<Element, typename T::SmemLayoutK>(mma_dk, acc_dk, p.scale, ss.k.data(), ctid);
  stage_accumulator<Element, typename T::SmemLayoutV>(mma_dv, acc_dv, 1.f, ss.v.data(), ctid);
  cutlass::arch::NamedBarrier::sync(T::kConsumerThreads, kConsumersBarrier);
  const int rows = min(T::kBlockN, p.s_kv - n0);
  store_swizzled_rows<T::kBlockN, T::kD, T::kConsumerThreads>(
      ss.k.data(), dk + static_cast<int64_t>(n0) * p.dk_strides.s, p.dk_strides.s, rows, ctid);
  store_swizzled_rows<T::kBlockN, T::kDv, T::kConsumerThreads>(
      ss.v.data(), dv + static_cast<int64_t>(n0) * p.dv_strides.s, p.dv_strides.s, rows, ctid);
}

}  // namespace floe::detail::sm90::bwd
