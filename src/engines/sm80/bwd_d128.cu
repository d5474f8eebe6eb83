// sm80 backward, head-dim tile d128: {f16, bf16} x {plain, score-mod}. Built in every kernel set
// (the ci set builds only this tile).
#include "engines/sm80/bwd_kernels.h"
#include "engines/sm80/bwd_launch.cuh"

namespace floe::detail::sm80 {

const BwdKernel* bwd_kernel_d128(DType dtype, bool score_mod) {
  return BwdTileKernels<HeadDimTile::d128>::get(dtype, score_mod);
}

}  // namespace floe::detail::sm80
