// sm80 backward: the fp32 dQ accumulator tile of one (batch, head, query tile), block_m x
// dq_ld floats to which every key tile that sees the query tile adds its dS K. The partial sums
// of a broadcast dBias (bwd_dbias_sum.cuh) are tiles of the same order, over the S fragment.
//
// The tile is stored in the order the dQ TiledMMA's threads hold it, not row-major, so that the
// additions of one warp land on contiguous bytes and need no address arithmetic beyond a base:
//   sm_90: chunks of 4 floats per thread, one red.global.add.v4.f32 each (a warp: 512 bytes);
//   sm_80: one float per thread, red.global.add.f32 (a warp: 128 bytes).
// The main kernel and the dQ epilogue come from the same image, so they agree on the order.
//
// Columns past d_qk are added too (they are zeros: K is zero-filled past d_qk in shared memory):
// a predicate per element made every red a branch, which cost more than the bytes.
#pragma once

#include <cute/tensor.hpp>

namespace floe::detail::sm80 {

// Where thread `tid` keeps element i of its dQ fragment, in floats from the tile's start.
template <int kThreads>
__device__ __forceinline__ int dq_accum_offset(int i, int tid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return ((i >> 2) * kThreads + tid) * 4 + (i & 3);
#else
  return i * kThreads + tid;
#endif
}

// tile[offset(i, tid)] += frag(i) for every i, as fire-and-forget reductions in L2.
template <int kThreads, class Frag>
__device__ __forceinline__ void dq_accum_add(float* tile, const Frag& frag, int tid) {
  using namespace cute;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static_assert(decltype(size(frag))::value % 4 == 0, "whole float4 chunks");
  CUTE_UNROLL
  for (int j = 0; j < size(frag) / 4; ++j) {
    float* dst = tile + (j * kThreads + tid) * 4;
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "f"(frag(4 * j)),
                 "f"(frag(4 * j + 1)), "f"(frag(4 * j + 2)), "f"(frag(4 * j + 3))
                 : "memory");
  }
#else
  CUTE_UNROLL
  for (int i = 0; i < size(frag); ++i) {
    asm volatile("red.global.add.f32 [%0], %1;" ::"l"(tile + i * kThreads + tid), "f"(frag(i))
                 : "memory");
  }
#endif
}

// tile[offset(i, tid)] = frag(i) for every i (16-byte stores on sm_90).
template <int kThreads, class Frag>
__device__ __forceinline__ void accum_store(float* tile, const Frag& frag, int tid) {
  using namespace cute;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static_assert(decltype(size(frag))::value % 4 == 0, "whole float4 chunks");
  CUTE_UNROLL
  for (int j = 0; j < size(frag) / 4; ++j) {
    reinterpret_cast<float4*>(tile)[j * kThreads + tid] =
        make_float4(frag(4 * j), frag(4 * j + 1), frag(4 * j + 2), frag(4 * j + 3));
  }
#else
  CUTE_UNROLL
  for (int i = 0; i < size(frag); ++i) tile[i * kThreads + tid] = frag(i);
#endif
}

// Elements 4j .. 4j + 3 of thread tid's fragment, through L2 (ld.global.cg: another CTA wrote
// the tile during this kernel, so L1 may hold none of it). One 16-byte load on sm_90.
template <int kThreads>
__device__ __forceinline__ float4 accum_load4(const float* tile, int j, int tid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return __ldcg(reinterpret_cast<const float4*>(tile) + j * kThreads + tid);
#else
  const float* at = tile + 4 * j * kThreads + tid;
  return make_float4(__ldcg(at), __ldcg(at + kThreads), __ldcg(at + 2 * kThreads),
                     __ldcg(at + 3 * kThreads));
#endif
}

}  // namespace floe::detail::sm80
