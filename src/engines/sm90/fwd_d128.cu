// sm90 forward, tile d128: {f16, bf16}. The ci kernel set builds bf16 only (one sm90 kernel).
#include "engines/sm90/fwd_kernels.h"
#include "engines/sm90/fwd_launch.cuh"

namespace floe::detail::sm90 {

const FwdKernel* fwd_kernel_d128(DType dtype) {
#if !defined(FLOE_KERNELS_CI)
  return FwdTileKernels<FwdTile::d128>::get(dtype);
#else
  return FwdTileKernels<FwdTile::d128, false>::get(dtype);
#endif
}

}  // namespace floe::detail::sm90
