// sm90 forward: the compiled kernel instantiations, as the planner sees them (no CUDA device
// code here). One entry per (tile, dtype); each tile's instantiations live in their own .cu
// file (fwd_<tile>.cu) so the build parallelises.
#pragma once

#include <cuda_runtime_api.h>

#include "engines/sm90/fwd_params.h"
#include "engines/sm90/fwd_tiles.h"
#include "floe/tensor.h"

namespace floe::detail::sm90 {

struct FwdKernel {
  const char* name;  // e.g. "sm90_fwd_d128_bf16", for messages
  int threads;
  int smem_bytes;  // dynamic shared memory per CTA
  int block_m, block_n;
  // Plan time: opts the kernel into its shared memory on the current device.
  cudaError_t (*prepare)();
  // Launch time: one launch on `stream`, then cudaGetLastError(); no sync, no allocation.
  cudaError_t (*launch)(const FwdParams& params, unsigned grid, cudaStream_t stream);
};

// nullptr: that instantiation is not built in this kernel set (FLOE_KERNELS=ci builds the d128
// tile only); generated per tile from tile_kernels.cu.in by floe_add_engine.
const FwdKernel* fwd_kernel_d64(DType dtype);
const FwdKernel* fwd_kernel_d128(DType dtype);
const FwdKernel* fwd_kernel_d256(DType dtype);

inline const FwdKernel* find_fwd_kernel(FwdTile tile, DType dtype) {
  switch (tile) {
    case FwdTile::d64:
      return fwd_kernel_d64(dtype);
    case FwdTile::d128:
      return fwd_kernel_d128(dtype);
    case FwdTile::d256:
      return fwd_kernel_d256(dtype);
  }
  return nullptr;
}

}  // namespace floe::detail::sm90
