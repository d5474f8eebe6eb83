// sm80 forward: the compiled kernel instantiations, as the planner sees them (no CUDA device
// code here). One entry per (head-dim tile, dtype, score-mod flag); each tile's instantiations
// live in their own .cu file (fwd_<tile>.cu) so the build parallelises.
#pragma once

#include <cuda_runtime_api.h>

#include "engines/sm80/fwd_params.h"
#include "engines/sm80/fwd_tiles.h"
#include "floe/tensor.h"

namespace floe::detail::sm80 {

struct FwdKernel {
  const char* name;  // e.g. "sm80_fwd_d128_bf16_plain", for messages
  int threads;
  int smem_bytes;  // dynamic shared memory per CTA
  // Plan time: opts the kernel into its shared memory on the current device (> 48 KB).
  cudaError_t (*prepare)();
  // Launch time: one launch on `stream`, then cudaGetLastError(); no sync, no allocation.
  cudaError_t (*launch)(const FwdParams& params, unsigned grid, cudaStream_t stream);
};

// nullptr: that instantiation is not built in this kernel set (FLOE_KERNELS=ci builds d128 only).
const FwdKernel* fwd_kernel_d64(DType dtype, bool score_mod);
const FwdKernel* fwd_kernel_d128(DType dtype, bool score_mod);
const FwdKernel* fwd_kernel_d192_128(DType dtype, bool score_mod);
const FwdKernel* fwd_kernel_d256(DType dtype, bool score_mod);

inline const FwdKernel* find_fwd_kernel(HeadDimTile tile, DType dtype, bool score_mod) {
  switch (tile) {
    case HeadDimTile::d64:
      return fwd_kernel_d64(dtype, score_mod);
    case HeadDimTile::d128:
      return fwd_kernel_d128(dtype, score_mod);
    case HeadDimTile::d192_128:
      return fwd_kernel_d192_128(dtype, score_mod);
    case HeadDimTile::d256:
      return fwd_kernel_d256(dtype, score_mod);
  }
  return nullptr;
}

}  // namespace floe::detail::sm80
