// sm90 backward, tile d64: {f16, bf16}. Not in the ci kernel set.
#include "engines/sm90/bwd_kernels.h"

#if !defined(FLOE_KERNELS_CI)
#include "engines/sm90/bwd_launch.cuh"
#endif

namespace floe::detail::sm90 {

const BwdKernel* bwd_kernel_d64(DType dtype) {
#if !defined(FLOE_KERNELS_CI)
  return BwdTileKernels<BwdTile::d64>::get(dtype);
#else
  (void)dtype;
  return nullptr;  // not in the ci kernel set
#endif
}

}  // namespace floe::detail::sm90
