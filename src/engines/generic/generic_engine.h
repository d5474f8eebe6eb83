// generic: the CUDA engine that serves every valid problem on a GPU (P5). fp32 arithmetic on
// CUDA cores, any strides, any head dims, every feature of DESIGN §2; no atomics, so every
// plan is bitwise deterministic.
//
// Kernels (256 threads a block, 64 x 64 score tiles, 4 x 4 scores a thread):
//   forward:  (b, h_q, 64-query tile, 64- or 128-column chunk of O)
//   backward: delta (Delta = rowsum dO*O), dsink (if declared), dK/dV per (b, h_kv, 64-key
//             tile, 64-column chunk), dQ per (b, h_q, 64-query tile, 64-column chunk), dbias
//             (if declared) per (bias b, bias h, query tile, key tile).
// Workspace: forward none; backward one chunk "delta", f32 [b, h_q, s_q] dense
// (4 * b * h_q * s_q bytes).
#pragma once

#include "engines/engine.h"

namespace floe::detail {

const Engine& generic_engine();

}  // namespace floe::detail
