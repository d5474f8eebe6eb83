// Views of sm80 m16n8k16 accumulator fragments, and the two register-level GEMM loops of the
// attention main loop, written with CuTe.
//
// A TiledMMA accumulator fragment has shape (4, MMA_M, MMA_N): the 4 values of one m16n8 atom are
// (row g, col 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1) with g = lane/4, t = lane%4.
#pragma once

#include <cutlass/numeric_conversion.h>
#include <cute/tensor.hpp>

namespace floe::kernels {

// (4, MMA_M, MMA_N) -> ((2, MMA_M), (2, MMA_N)): rows this thread holds x columns it holds.
template <class Layout>
__device__ __forceinline__ constexpr auto acc_row_col_layout(Layout const& acc) {
  using namespace cute;
  static_assert(decltype(size<0>(acc))::value == 4, "expects an m16n8 accumulator");
  auto split = logical_divide(acc, cute::Shape<_2>{});  // ((col pair, row half), MMA_M, MMA_N)
  return make_layout(make_layout(get<0, 1>(split), get<1>(split)),
                     make_layout(get<0, 0>(split), get<2>(split)));
}

template <class Tensor>
__device__ __forceinline__ auto acc_row_col(Tensor&& acc) {
  return cute::make_tensor(acc.data(), acc_row_col_layout(acc.layout()));
}

// The accumulator of S = Q K^T as the A operand of O += P V: two neighbouring n8 blocks of keys
// make the k16 slice of one m16n8k16 A fragment. (4, MMA_M, MMA_N) -> ((4, 2), MMA_M, MMA_N / 2).
template <class Layout>
__device__ __forceinline__ constexpr auto acc_as_a_operand_layout(Layout const& acc) {
  using namespace cute;
  static_assert(decltype(size<0>(acc))::value == 4, "expects an m16n8 accumulator");
  static_assert(decltype(size<2>(acc))::value % 2 == 0, "needs an even number of n8 blocks");
  auto pairs =
      logical_divide(acc, cute::Shape<Underscore, Underscore, _2>{});  // (4, MMA_M, (2, MMA_N/2))
  return make_layout(make_layout(get<0>(pairs), get<2, 0>(pairs)), get<1>(pairs), get<2, 1>(pairs));
}

// Elementwise float -> Element (f16 / bf16, round to nearest even), two values per instruction.
template <class Element, class Tensor>
__device__ __forceinline__ auto convert_fragment(Tensor const& src) {
  using namespace cute;
  constexpr int N = decltype(size(src))::value;
  static_assert(N % 2 == 0, "converts pairs");
  auto out = make_tensor<Element>(src.layout());
  cutlass::NumericArrayConverter<Element, float, 2> convert;
  auto const* in2 = reinterpret_cast<const cutlass::Array<float, 2>*>(src.data());
  auto* out2 = reinterpret_cast<cutlass::Array<Element, 2>*>(out.data());
  CUTE_UNROLL
  for (int i = 0; i < N / 2; ++i) out2[i] = convert(in2[i]);
  return out;
}

// acc += A B^T with A and B both read from shared memory through ldmatrix, one k16 slice ahead
// of the tensor-core work.
template <class TiledMma, class Acc, class FragA, class FragB, class SmemA, class SmemB,
          class ViewA, class ViewB, class CopyA, class CopyB>
__device__ __forceinline__ void gemm_smem_smem(TiledMma const& mma, Acc& acc, FragA& frag_a,
                                               FragB& frag_b, SmemA const& smem_a,
                                               SmemB const& smem_b, ViewA& view_a, ViewB& view_b,
                                               CopyA const& copy_a, CopyB const& copy_b) {
  using namespace cute;
  constexpr int kSteps = decltype(size<2>(frag_a))::value;
  copy(copy_a, smem_a(_, _, Int<0>{}), view_a(_, _, Int<0>{}));
  copy(copy_b, smem_b(_, _, Int<0>{}), view_b(_, _, Int<0>{}));
  CUTE_UNROLL
  for (int k = 0; k < kSteps; ++k) {
    if (k + 1 < kSteps) {
      copy(copy_a, smem_a(_, _, k + 1), view_a(_, _, k + 1));
      copy(copy_b, smem_b(_, _, k + 1), view_b(_, _, k + 1));
    }
    gemm(mma, frag_a(_, _, k), frag_b(_, _, k), acc);
  }
}

// acc += A B^T with A already in registers and B read from shared memory one slice ahead.
template <class TiledMma, class Acc, class FragA, class FragB, class SmemB, class ViewB,
          class CopyB>
__device__ __forceinline__ void gemm_reg_smem(TiledMma const& mma, Acc& acc, FragA const& frag_a,
                                              FragB& frag_b, SmemB const& smem_b, ViewB& view_b,
                                              CopyB const& copy_b) {
  using namespace cute;
  constexpr int kSteps = decltype(size<2>(frag_a))::value;
  copy(copy_b, smem_b(_, _, Int<0>{}), view_b(_, _, Int<0>{}));
  CUTE_UNROLL
  for (int k = 0; k < kSteps; ++k) {
    if (k + 1 < kSteps) copy(copy_b, smem_b(_, _, k + 1), view_b(_, _, k + 1));
    gemm(mma, frag_a(_, _, k), frag_b(_, _, k), acc);
  }
}

}  // namespace floe::kernels
