// sm80 forward: the host side of one instantiation (shared-memory opt-in, launch) and the table
// of a tile's four instantiations. Included only by the fwd_<tile>.cu files.
#pragma once

#include <cuda_runtime_api.h>

#include "engines/sm80/fwd_kernel.cuh"
#include "engines/sm80/fwd_kernels.h"
#include "engines/sm80/fwd_traits.cuh"

namespace floe::detail::sm80 {

template <class T, bool kScoreMod>
cudaError_t fwd_prepare() {
  if (T::kSmemBytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(fwd_kernel<T, kScoreMod>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              T::kSmemBytes);
}

template <class T, bool kScoreMod>
cudaError_t fwd_launch(const FwdParams& params, unsigned grid, cudaStream_t stream) {
  fwd_kernel<T, kScoreMod><<<grid, T::kThreads, T::kSmemBytes, stream>>>(params);
  return cudaGetLastError();
}

template <class T, bool kScoreMod>
constexpr FwdKernel fwd_entry(const char* name) {
  return FwdKernel{name, T::kThreads, T::kSmemBytes, &fwd_prepare<T, kScoreMod>,
                   &fwd_launch<T, kScoreMod>};
}

// The four instantiations of a tile: {f16, bf16} x {plain, score-mod}.
template <HeadDimTile kTile>
struct FwdTileKernels {
  using F16 = FwdTraits<kTile, cute::half_t>;
  using BF16 = FwdTraits<kTile, cute::bfloat16_t>;

  static const FwdKernel* get(DType dtype, bool score_mod) {
    const auto& names = kKernelNames[0][static_cast<int>(kTile)];
    static const FwdKernel table[4] = {
        fwd_entry<F16, false>(names[0]), fwd_entry<F16, true>(names[1]),
        fwd_entry<BF16, false>(names[2]), fwd_entry<BF16, true>(names[3])};
    if (dtype != DType::f16 && dtype != DType::bf16) return nullptr;
    return &table[(dtype == DType::bf16 ? 2 : 0) + (score_mod ? 1 : 0)];
  }
};

}  // namespace floe::detail::sm80
