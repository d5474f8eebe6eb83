// sm90 backward, last kernel: one CTA per (query tile, head, batch) turns the fp32 dQ accumulator
// into dQ = scale * accum, rounded to the element type and written through dQ's strides. The
// accumulator holds each tile in the main kernel's fragment order (bwd_traits.cuh): thread t of
// this CTA reads the float4s consumer thread t stored there, places its elements by the same
// partition of the dQ product into a row-major tile in shared memory, and the tile goes out 16
// bytes a thread. Rows no key tile reached hold the preprocess's zeros.
#pragma once

#include <cute/tensor.hpp>

#include "engines/sm90/bwd_params.h"
#include "engines/sm90/bwd_traits.cuh"
#include "kernels/tile_scheduler.cuh"

namespace floe::detail::sm90 {

template <class T>
__global__ void __launch_bounds__(T::kConsumerThreads)
    bwd_dq_convert_kernel(const __grid_constant__ BwdParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace cute;
  using Element = typename T::Element;
  constexpr int kThreads = T::kConsumerThreads;
  constexpr int kD = T::kD;
  // 8 elements of padding a row: the fragment's 8 rows of a warp's store land 16 bytes apart in
  // the banks instead of on the same ones.
  constexpr int kRowElems = kD + 8;
  __shared__ alignas(16) Element tile_s[T::kBlockM * kRowElems];

  const int tid = static_cast<int>(threadIdx.x);
  const kernels::QueryTile tile = kernels::QueryTileScheduler::tile(p.query_tiles, blockIdx.x);
  const int m0 = tile.m_block * T::kBlockM;
  const float* acc =
      p.dq_accum + ((static_cast<int64_t>(tile.b) * p.h_q + tile.h) * p.s_q_pad + m0) * kD;

  const float4* src =
      reinterpret_cast<const float4*>(acc + (tid / 128) * T::kDqHalfFloats) + tid % 128;
  // Each fragment value, scaled, to its (query row, d column) of the smem tile: row_col(i) says
  // where value i of this thread belongs.
  auto stage = [&](auto&& row_col) {
    CUTE_UNROLL
    for (int j = 0; j < T::kDqFrag / 4; ++j) {
      const float4 a = src[j * 128];
      const float in[4] = {a.x, a.y, a.z, a.w};
      CUTE_UNROLL
      for (int e = 0; e < 4; ++e) {
        const auto rc = row_col(4 * j + e);
        tile_s[get<0>(rc) * kRowElems + get<1>(rc)] = static_cast<Element>(in[e] * p.scale);
      }
    }
  };
  if constexpr (T::kDqThirds) {
    stage([&](int i) { return dq_third_coord<T>(tid, i); });
  } else {
    typename T::MmadQ mma_dq;
    Tensor coord =
        mma_dq.get_thread_slice(tid).partition_C(make_identity_tensor(typename T::TileDq{}));
    static_assert(decltype(size(coord))::value == T::kDqFrag, "dQ fragment size");
    stage([&](int i) {
      return cute::make_tuple(get < T::kDqSwapAB ? 1 : 0 > (coord(i)),
                              get < T::kDqSwapAB ? 0 : 1 > (coord(i)));
    });
  }
  __syncthreads();

  Element* dq = static_cast<Element*>(p.dq) + tile.b * p.dq_strides.b + tile.h * p.dq_strides.h +
                static_cast<int64_t>(m0) * p.dq_strides.s;
  const int rows = min(T::kBlockM, p.s_q - m0);
  constexpr int kPerRow = kD / 8;
  for (int x = tid; x < rows * kPerRow; x += kThreads) {
    const int row = x / kPerRow, col = (x % kPerRow) * 8;
    *reinterpret_cast<uint4*>(dq + row * p.dq_strides.s + col) =
        *reinterpret_cast<const uint4*>(tile_s + row * kRowElems + col);
  }
#endif
}

}  // namespace floe::detail::sm90
