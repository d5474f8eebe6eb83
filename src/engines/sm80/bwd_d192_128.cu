// sm80 backward, head-dim tile d192x128: {f16, bf16} x {plain, score-mod}.
#include "engines/sm80/bwd_kernels.h"

#if !defined(FLOE_KERNELS_CI)
#include "engines/sm80/bwd_launch.cuh"
#endif

namespace floe::detail::sm80 {

const BwdKernel* bwd_kernel_d192_128(DType dtype, bool score_mod) {
#if !defined(FLOE_KERNELS_CI)
  return BwdTileKernels<HeadDimTile::d192_128>::get(dtype, score_mod);
#else
  (void)dtype;
  (void)score_mod;
  return nullptr;  // not in the ci kernel set
#endif
}

}  // namespace floe::detail::sm80
