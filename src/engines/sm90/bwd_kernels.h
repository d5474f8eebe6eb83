// sm90 backward: the compiled instantiations, as the planner sees them (no device code here).
// One entry per (tile, dtype); each tile's instantiations live in their own .cu file
// (bwd_<tile>.cu). An entry launches the whole backward: preprocess, main kernel, dQ convert.
#pragma once

#include <cuda_runtime_api.h>

#include "engines/sm90/bwd_params.h"
#include "engines/sm90/bwd_tiles.h"
#include "floe/tensor.h"

namespace floe::detail::sm90 {

struct BwdGrids {
  unsigned query_tiles = 0;  // preprocess and dQ convert: num_m_blocks * h_q * b
  unsigned key_tiles = 0;    // main kernel: num_n_blocks * h_kv * b
};

struct BwdKernel {
  const char* name;  // e.g. "sm90_bwd_d128_bf16", for messages
  int threads;       // of the main kernel
  int smem_bytes;    // dynamic shared memory of the main kernel
  int block_m, block_n;
  // Plan time: opts the main kernel into its shared memory on the current device.
  cudaError_t (*prepare)();
  // Launch time: the three kernels in stream order, then cudaGetLastError(); no sync, no
  // allocation.
  cudaError_t (*launch)(const BwdParams& params, const BwdGrids& grids, cudaStream_t stream);
  // The same three kernels, for launches through the driver (engines/kernel_launch.h): the plan
  // resolves their functions once; launch above serves a thread whose context is not the plan's.
  // Grids: the key tiles for the main kernel (steps[1]), the query tiles for the other two.
  struct Step {
    void (*symbol)(BwdParams);
    int threads;
    int smem_bytes;
  };
  Step steps[3];
};

// nullptr: that instantiation is not built in this kernel set (FLOE_KERNELS=ci builds d128 bf16
// only).
const BwdKernel* bwd_kernel_d64(DType dtype);
const BwdKernel* bwd_kernel_d128(DType dtype);

inline const BwdKernel* find_bwd_kernel(BwdTile tile, DType dtype) {
  switch (tile) {
    case BwdTile::d64:
      return bwd_kernel_d64(dtype);
    case BwdTile::d128:
      return bwd_kernel_d128(dtype);
  }
  return nullptr;
}

}  // namespace floe::detail::sm90
