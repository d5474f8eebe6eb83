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
constexpr FwdKernel fwd_entry(const char* name, const FwdKernel* score_mod = nullptr,
                              const FwdKernel* sink = nullptr) {
  return FwdKernel{name,           T::kThreads,    T::kSmemBytes,
                   T::kBlockM,     T::kBlockN,     &fwd_prepare<T>,
                   &fwd_launch<T>, &fwd_kernel<T>, score_mod,
                   sink};
}

// The plain kernel's sink sibling: its main loop, and the sink in the epilogue. A sink alone costs
// 3-4% in the score-mod kernel (measured; its main loop carries the softcap's and the bias's code),
// while the sink in the plain kernel itself slowed plain problems by 0.4-4% (ptxas scheduled its
// main loop differently): hence a kernel of its own (H200 measurements in README.md).
template <class Base>
struct SinkTraits : Base {
  static constexpr bool kSink = true;
};

// A tile's instantiations: {f16, bf16} x {plain, sink, score-mod}; get() returns the plain one,
// which points at its siblings.
template <FwdTile kTile>
struct FwdTileKernels {
  static const FwdKernel* get(DType dtype) {
    constexpr int i = static_cast<int>(kTile);
    if (dtype == DType::bf16) {
      static const FwdKernel score_mod =
          fwd_entry<FwdTraits<kTile, cute::bfloat16_t, true>>(kFwdScoreModKernelNames[i][1]);
      static const FwdKernel sink =
          fwd_entry<SinkTraits<FwdTraits<kTile, cute::bfloat16_t>>>(kFwdSinkKernelNames[i][1]);
      static const FwdKernel plain =
          fwd_entry<FwdTraits<kTile, cute::bfloat16_t>>(kFwdKernelNames[i][1], &score_mod, &sink);
      return &plain;
    }
    if (dtype == DType::f16) {
      static const FwdKernel score_mod =
          fwd_entry<FwdTraits<kTile, cute::half_t, true>>(kFwdScoreModKernelNames[i][0]);
      static const FwdKernel sink =
          fwd_entry<SinkTraits<FwdTraits<kTile, cute::half_t>>>(kFwdSinkKernelNames[i][0]);
      static const FwdKernel plain =
          fwd_entry<FwdTraits<kTile, cute::half_t>>(kFwdKernelNames[i][0], &score_mod, &sink);
      return &plain;
    }
    return nullptr;
  }
};

}  // namespace floe::detail::sm90
