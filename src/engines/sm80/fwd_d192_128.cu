// sm80 forward, head-dim tile d192x128: {f16, bf16} x {plain, score-mod}.
#include "engines/sm80/fwd_kernels.h"

#if !defined(FLOE_KERNELS_CI)
#include "engines/sm80/fwd_launch.cuh"
#endif

namespace floe::detail::sm80 {

const FwdKernel* fwd_kernel_d192_128(DType dtype, bool score_mod) {
#if !defined(FLOE_KERNELS_CI)
  static const char* const names[4] = {
      "sm80_fwd_d192x128_f16_plain", "sm80_fwd_d192x128_f16_scoremod",
      "sm80_fwd_d192x128_bf16_plain", "sm80_fwd_d192x128_bf16_scoremod"};
  return FwdTileKernels<FwdTile::d192_128>::get(dtype, score_mod, names);
#else
  (void)dtype;
  (void)score_mod;
  return nullptr;  // not in the ci kernel set
#endif
}

}  // namespace floe::detail::sm80
