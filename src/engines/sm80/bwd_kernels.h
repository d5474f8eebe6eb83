// sm80 backward: the compiled instantiations, as the planner sees them (no device code here).
// One entry per (head-dim tile, dtype, score-mod flag); each tile's instantiations live in their
// own .cu file (bwd_<tile>.cu) so the build parallelises. An entry launches the whole backward:
// preprocess, the broadcast-dBias kernel when the problem has one, main kernel, dQ epilogue,
// and the dSink kernel when the problem has one.
#pragma once

#include <cuda_runtime_api.h>

#include "engines/sm80/bwd_params.h"
#include "engines/sm80/bwd_tiles.h"
#include "floe/tensor.h"

namespace floe::detail::sm80 {

struct BwdGrids {
  unsigned query_tiles = 0;  // preprocess and dQ epilogue: num_m_blocks * h_q * b
  unsigned key_tiles = 0;    // main kernel: num_n_blocks * h_kv * b
  unsigned heads = 0;        // dSink: h_q
  unsigned bias_tiles = 0;   // broadcast dBias: num_m_blocks * num_n_blocks * bias_h * bias_b
};

struct BwdKernel {
  const char* name;  // e.g. "sm80_bwd_d128_bf16_plain", for messages
  int threads;       // of the main kernel
  int smem_bytes;    // dynamic shared memory of the main kernel
  // Plan time: opts the main kernel into its shared memory on the current device.
  cudaError_t (*prepare)();
  // Launch time: the kernels in stream order, then cudaGetLastError(); no sync, no allocation.
  cudaError_t (*launch)(const BwdParams& params, const BwdGrids& grids, cudaStream_t stream);
};

// nullptr: that instantiation is not built in this kernel set (FLOE_KERNELS=ci builds d128 only).
const BwdKernel* bwd_kernel_d64(DType dtype, bool score_mod);
const BwdKernel* bwd_kernel_d128(DType dtype, bool score_mod);
const BwdKernel* bwd_kernel_d192_128(DType dtype, bool score_mod);
const BwdKernel* bwd_kernel_d256(DType dtype, bool score_mod);

inline const BwdKernel* find_bwd_kernel(HeadDimTile tile, DType dtype, bool score_mod) {
  switch (tile) {
    case HeadDimTile::d64:
      return bwd_kernel_d64(dtype, score_mod);
    case HeadDimTile::d128:
      return bwd_kernel_d128(dtype, score_mod);
    case HeadDimTile::d192_128:
      return bwd_kernel_d192_128(dtype, score_mod);
    case HeadDimTile::d256:
      return bwd_kernel_d256(dtype, score_mod);
  }
  return nullptr;
}

}  // namespace floe::detail::sm80
