// sm80 forward, head-dim tile d64: {f16, bf16} x {plain, score-mod}.
#include "engines/sm80/fwd_kernels.h"

#if !defined(FLOE_KERNELS_CI)
#include "engines/sm80/fwd_launch.cuh"
#endif

namespace floe::detail::sm80 {

const FwdKernel* fwd_kernel_d64(DType dtype, bool score_mod) {
#if !defined(FLOE_KERNELS_CI)
  return FwdTileKernels<HeadDimTile::d64>::get(dtype, score_mod);
#else
  (void)dtype;
  (void)score_mod;
  return nullptr;  // not in the ci kernel set
#endif
}

}  // namespace floe::detail::sm80
