// sm90 forward, tile d256: {f16, bf16}. Not in the ci kernel set.
#include "engines/sm90/fwd_kernels.h"

#if !defined(FLOE_KERNELS_CI)
#include "engines/sm90/fwd_launch.cuh"
#endif

namespace floe::detail::sm90 {

const FwdKernel* fwd_kernel_d256(DType dtype) {
#if !defined(FLOE_KERNELS_CI)
  return FwdTileKernels<FwdTile::d256>::get(dtype);
#else
  (void)dtype;
  return nullptr;  // not in the ci kernel set
#endif
}

}  // namespace floe::detail::sm90
