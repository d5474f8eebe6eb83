// sm90 forward: the compiled kernel instantiations, as the planner sees them (no CUDA device
// code here). One entry per (tile, dtype, score-mod flag); each tile's instantiations live in
// their own .cu file (fwd_<tile>.cu) so the build parallelises. The generated lookup per tile
// (shared with the backward's template) returns the plain entry, which points at its score-mod
// sibling.
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
  // The kernel itself, for launches through the driver (engines/kernel_launch.h): the plan
  // resolves its function once; launch above serves a thread whose context is not the plan's.
  void (*symbol)(FwdParams);
  // The plain entry's siblings (null in theirs): the score-mod kernel (softcap, bias, and a sink
  // beside them), and the sink kernel (a sink alone: the plain main loop, the sink folded in by
  // the epilogue).
  const FwdKernel* score_mod = nullptr;
  const FwdKernel* sink = nullptr;
};

// nullptr: that instantiation is not built in this kernel set (FLOE_KERNELS=ci builds the d128
// tile only); generated per tile from tile_kernels.cu.in by floe_add_engine.
const FwdKernel* fwd_kernel_d64(DType dtype);
const FwdKernel* fwd_kernel_d128(DType dtype);
const FwdKernel* fwd_kernel_d256(DType dtype);
const FwdKernel* fwd_kernel_d192_128(DType dtype);

inline const FwdKernel* find_fwd_kernel(FwdTile tile, DType dtype, bool score_mod = false,
                                        bool sink = false) {
  const FwdKernel* plain = nullptr;
  switch (tile) {
    case FwdTile::d64:
      plain = fwd_kernel_d64(dtype);
      break;
    case FwdTile::d128:
      plain = fwd_kernel_d128(dtype);
      break;
    case FwdTile::d256:
      plain = fwd_kernel_d256(dtype);
      break;
    case FwdTile::d192_128:
      plain = fwd_kernel_d192_128(dtype);
      break;
  }
  if (plain == nullptr) return nullptr;
  return score_mod ? plain->score_mod : sink ? plain->sink : plain;
}

}  // namespace floe::detail::sm90
