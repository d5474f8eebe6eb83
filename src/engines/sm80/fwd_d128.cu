// sm80 forward, head-dim tile d128: {f16, bf16} x {plain, score-mod}. Built in every kernel set
// (the ci set builds only this tile).
#include "engines/sm80/fwd_kernels.h"
#include "engines/sm80/fwd_launch.cuh"

namespace floe::detail::sm80 {

const FwdKernel* fwd_kernel_d128(DType dtype, bool score_mod) {
  static const char* const names[4] = {"sm80_fwd_d128_f16_plain", "sm80_fwd_d128_f16_scoremod",
                                       "sm80_fwd_d128_bf16_plain", "sm80_fwd_d128_bf16_scoremod"};
  return FwdTileKernels<FwdTile::d128>::get(dtype, score_mod, names);
}

}  // namespace floe::detail::sm80
