// sm90 backward, tile d128: {f16, bf16}. The ci kernel set builds bf16 only.
#include "engines/sm90/bwd_kernels.h"
#include "engines/sm90/bwd_launch.cuh"

namespace floe::detail::sm90 {

const BwdKernel* bwd_kernel_d128(DType dtype) {
#if !defined(FLOE_KERNELS_CI)
  return BwdTileKernels<BwdTile::d128>::get(dtype);
#else
  return BwdTileKernels<BwdTile::d128, false>::get(dtype);
#endif
}

}  // namespace floe::detail::sm90
