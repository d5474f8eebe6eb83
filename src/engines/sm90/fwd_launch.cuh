// sm90 forward: the host side of one instantiation (shared-memory opt-in, launch) and the table
// of a tile's instantiations. Included only by the fwd_<tile>.cu files.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>
#include <type_traits>

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
constexpr FwdKernel fwd_entry(const char* name, const FwdKernel* score_mod = nullptr) {
  return FwdKernel{name,       T::kThreads,     T::kSmemBytes,  T::kBlockM,
                   T::kBlockN, &fwd_prepare<T>, &fwd_launch<T>, score_mod};
}

// Dev A/B of the score-mod kernel, to be removed once measured: FLOE_SM90_SCORE_MOD_AB=flat (no
// pingpong) or pp2 (pingpong, 2 elements in 4 of the softcap's exp2 on the FMA pipe), read once
// per process, swaps the bf16 d128 score-mod kernel (the default is the traits').
template <class Base, int kPoly, bool kPP>
struct ScoreModVariant : Base {
  static constexpr int kSoftcapPolyOf4 = kPoly;
  static constexpr bool kPingpong = kPP;
};

template <FwdTile kTile, class Element>
FwdKernel score_mod_entry(const char* name) {
  using T = FwdTraits<kTile, Element, true>;
  if constexpr (kTile == FwdTile::d128 && std::is_same_v<Element, cute::bfloat16_t>) {
    const char* env = std::getenv("FLOE_SM90_SCORE_MOD_AB");
    const std::string ab = env != nullptr ? env : "";
    if (ab == "flat") return fwd_entry<ScoreModVariant<T, 0, false>>(name);
    if (ab == "pp2") return fwd_entry<ScoreModVariant<T, 2, true>>(name);
  }
  return fwd_entry<T>(name);
}

// A tile's instantiations: {f16, bf16} x {plain, score-mod}; get() returns the plain one, which
// points at its score-mod sibling.
template <FwdTile kTile>
struct FwdTileKernels {
  static const FwdKernel* get(DType dtype) {
    constexpr int i = static_cast<int>(kTile);
    if (dtype == DType::bf16) {
      static const FwdKernel score_mod =
          score_mod_entry<kTile, cute::bfloat16_t>(kFwdScoreModKernelNames[i][1]);
      static const FwdKernel plain =
          fwd_entry<FwdTraits<kTile, cute::bfloat16_t>>(kFwdKernelNames[i][1], &score_mod);
      return &plain;
    }
    if (dtype == DType::f16) {
      static const FwdKernel score_mod =
          fwd_entry<FwdTraits<kTile, cute::half_t, true>>(kFwdScoreModKernelNames[i][0]);
      static const FwdKernel plain =
          fwd_entry<FwdTraits<kTile, cute::half_t>>(kFwdKernelNames[i][0], &score_mod);
      return &plain;
    }
    return nullptr;
  }
};

}  // namespace floe::detail::sm90
