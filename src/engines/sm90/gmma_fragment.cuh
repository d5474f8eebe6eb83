// Views of an sm90 GMMA accumulator (per thread: ((2 columns, 2 row halves, N / 8 column
// blocks), MMA_M, MMA_N), the four lanes of a quad sharing each row), a staged bias tile read in
// that view, and the GEMM issue helper. The row/col view is what the mask and the softmax index;
// the A-operand view turns the scores of S = Q K^T into the register operand of O += P V without
// moving a value.
#pragma once

#include <cute/arch/mma_sm90_desc.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>

namespace floe::detail::sm90 {

// ((2, 2, V), M, N) -> ((2 row halves, M), (2 columns, V, N)).
template <class Layout>
__device__ __forceinline__ constexpr auto gmma_row_col_layout(Layout const& acc) {
  using namespace cute;
  static_assert(decltype(rank<0>(acc))::value == 3, "expects a GMMA accumulator");
  return make_layout(make_layout(get<0, 1>(acc), get<1>(acc)),
                     make_layout(get<0, 0>(acc), get<0, 2>(acc), get<2>(acc)));
}

template <class Tensor>
__device__ __forceinline__ auto gmma_row_col(Tensor&& acc) {
  return cute::make_tensor(acc.data(), gmma_row_col_layout(acc.layout()));
}

// A k16 slice of the register A operand holds, per thread, the values of two neighbouring
// n8 blocks of the accumulator: ((2, 2, V), M, N) -> ((2, 2, 2), M, (V / 2, N)).
template <class Layout>
__device__ __forceinline__ constexpr auto gmma_acc_as_a_layout(Layout const& acc) {
  using namespace cute;
  auto blocks = logical_divide(get<0, 2>(acc), make_layout(_2{}));  // (2, V / 2)
  return make_layout(make_layout(get<0, 0>(acc), get<0, 1>(acc), get<0>(blocks)), get<1>(acc),
                     coalesce(make_layout(get<1>(blocks), get<2>(acc))));
}

// The bias tile of one ring stage (kBlockM query rows x kBlockN keys, 2-byte elements), read as
// the row/col view of this thread's S accumulator reads it (kernels::add_bias_tile). A consumer
// warpgroup's GMMA is 64 x kBlockN: consumer thread ctid holds rows 16 w + g and 16 w + g + 8 of
// the tile (w = ctid / 32, its warp among the consumers; g = lane / 4) and columns 8 v + 2 t and 8
// v + 2 t + 1 (t = lane % 4); in view order r is the row half and j = 2 v + the column. TMA wrote
// the tile in boxes of 64 columns, [kBlockN / 64][kBlockM][64], the 16-byte pieces of each 128-byte
// row permuted by the 128-byte swizzle: piece p of row `row` sits at p ^ (row % 8). Both rows of a
// thread have row % 8 = g, so the eight piece addresses are computed once and every column pair is
// a 4-byte load at one of them plus a constant (CuTe's swizzled view computed a 64-bit generic
// address per element, and its hoisted offsets spilled).
template <class Element, int kBlockM>
struct GmmaBiasTile {
  uint32_t piece[8];  // shared address of the thread's first row, column 2 t of piece k ^ g

  __device__ __forceinline__ GmmaBiasTile(const Element* tile, int ctid) {
    const int lane = ctid % 32, g = lane / 4, t = lane % 4;
    const uint32_t row = (ctid / 32) * 16 + g;
    const uint32_t base = cute::cast_smem_ptr_to_uint(tile) + row * 128 + t * 4;
    CUTE_UNROLL
    for (int k = 0; k < 8; ++k) piece[k] = base + ((k ^ g) * 16);
  }

  // Elements (r, j) and (r, j + 1), j even: one 4-byte load.
  __device__ __forceinline__ float2 operator()(int r, int j) const {
    const int v = j / 2;
    const uint32_t addr = piece[v % 8] + (v / 8) * (kBlockM * 128) + r * 8 * 128;
    uint32_t bits;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(bits) : "r"(addr));
    return make_float2(static_cast<float>(Element::bitcast(static_cast<uint16_t>(bits))),
                       static_cast<float>(Element::bitcast(static_cast<uint16_t>(bits >> 16))));
  }
};

// Issues C (+)= A B over the whole K extent as one warpgroup batch; the caller waits
// (warpgroup_wait) before reading C. kZero: C = A B.
template <bool kZero, class Mma, class TA, class TB, class TC>
__device__ __forceinline__ void gmma(Mma& mma, TA const& a, TB const& b, TC& c) {
  using namespace cute;
  warpgroup_fence_operand(c);
  warpgroup_arrive();
  if constexpr (kZero) mma.accumulate_ = GMMA::ScaleOut::Zero;
  CUTE_UNROLL
  for (int k = 0; k < size<2>(a); ++k) {
    cute::gemm(mma, a(_, _, k), b(_, _, k), c);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  warpgroup_fence_operand(c);
}

}  // namespace floe::detail::sm90
