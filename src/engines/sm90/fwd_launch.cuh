// sm90 forward: the host side of one instantiation (shared-memory opt-in, launch) and the table
// of a tile's instantiations. Included only by the fwd_<tile>.cu files.
#pragma once

#include <cuda_runtime_api.h>

#include "engines/sm90/fwd_kernel.cuh"
#include "engines/sm90/fwd_kernels.h"
#include "engines/sm90/fwd_traits.cuh"

namespace floe::detail::sm90 {

template <class T>
cudaError_t fwd_prepare() {
  return cudaFuncSetAttribute(fwd_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              T::kSmemBytes);
}

template <class T>
cudaError_t fwd_launch(const FwdParams& params, unsigned grid, cudaStream_t stream) {
  fwd_kernel<T><<<grid, T::kThreads, T::kSmemBytes, stream>>>(params);
  return cudaGetLastError();
}

template <class T>
constexpr FwdKernel fwd_entry(const char* name) {
  return FwdKernel{name,       T::kThreads,     T::kSmemBytes, T::kBlockM,
                   T::kBlockN, &fwd_prepare<T>, &fwd_launch<T>};
}

// A tile's instantiations: f16 and bf16.
template <FwdTile kTile>
struct FwdTileKernels {
  static const FwdKernel* get(DType dtype) {
    static const FwdKernel bf16 = fwd_entry<FwdTraits<kTile, cute::bfloat16_t>>(names()[1]);
    if (dtype == DType::bf16) return &bf16;
    static const FwdKernel f16 = fwd_entry<FwdTraits<kTile, cute::half_t>>(names()[0]);
    if (dtype == DType::f16) return &f16;
    return nullptr;
  }
  static constexpr const char* const* names() {
    constexpr int i = static_cast<int>(kTile);
    return kFwdKernelNames[i];
  }
};

}  // namespace floe::detail::sm90
