// Views of an sm90 GMMA accumulator (per thread: ((2 columns, 2 row halves, N / 8 column
// blocks), MMA_M, MMA_N), the four lanes of a quad sharing each row), and the GEMM issue
// helper. The row/col view is what the mask and the softmax index; the A-operand view turns
// the scores of S = Q K^T into the register operand of O += P V without moving a value.
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
