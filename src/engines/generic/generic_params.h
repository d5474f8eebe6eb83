// The kernel arguments of the generic engine: everything plan() decided (P1), plus the device
// pointers filled in by launch(). Plain data shared by host (.cc) and device (.cu) code.
#pragma once

#include <cstdint>

#include "kernels/band_mask.h"
#include "kernels/ragged_rows.h"
#include "kernels/seq_lens.cuh"

namespace floe::detail::generic {

// A tensor of rank <= 4: base pointer and element strides in logical order (unused dims 0).
struct TensorArg {
  void* ptr = nullptr;
  int64_t s[4] = {0, 0, 0, 0};
};

// One kernel's launch: `blocks` logical blocks of 256 threads, run by `grid` CUDA blocks
// (grid <= blocks; each CUDA block walks blocks grid apart, so any count fits grid.x).
struct KernelGrid {
  int64_t blocks = 0;
  unsigned grid = 0;
};

inline constexpr int kThreads = 256;
inline constexpr int kTile = 64;              // query rows / keys per tile
inline constexpr int kDChunk = 64;            // backward: head-dim columns of an output per block
inline constexpr int kDeltaRowsPerBlock = 8;  // delta kernel: one warp per row

struct Params {
  // Operands. Bias strides of a broadcast (size-1) dim are 0, so indexing by (b, h) works.
  TensorArg q, k, v, o, stats, bias;
  TensorArg d_o, dq, dk, dv, dbias;
  TensorArg sink, dsink;  // f32 [h_q]
  kernels::SeqLens lens;  // seq_len_q / seq_len_kv, i32 [b]
  // DESIGN 2.1, 2.2. A ragged side's tensors are described as [B, H, S, D]
  // with a zero batch stride and the token stride as the row stride; batch b's rows start
  // at its slot's first token (BatchLens::q0, kv0). Paged K and V keep their own strides
  // [page, row, head, d]; the forward stages each key tile's row offsets in shared memory.
  bool ragged_q = false, ragged_kv = false, paged_kv = false;
  kernels::RaggedSide rq, rkv;
  kernels::PagedSide pages;
  float* delta = nullptr;  // workspace "delta": f32 [b, h_q, s_q], dense

  int64_t b = 0, h_q = 0, h_kv = 0, s_q = 0, s_kv = 0, d_qk = 0, d_v = 0, group = 1;
  int64_t bias_b = 1, bias_h = 1;  // bias's leading dims

  float scale = 1;       // s = scale * q.k
  float scale_log2 = 1;  // scale * log2(e)
  float softcap = 0, inv_softcap = 0;
  bool has_softcap = false, has_bias = false, has_sink = false, has_stats = false;
  bool has_dbias = false, has_dsink = false;
  kernels::BandMask band;

  // Tiling.
  int64_t n_qt = 0;      // query tiles: ceil(s_q / 64)
  int64_t n_kt = 0;      // key tiles: ceil(s_kv / 64)
  int64_t fwd_cols = 0;  // forward: O columns per block (64 or 128)
  int64_t fwd_nc = 0;    // forward: ceil(d_v / fwd_cols)
  int64_t n_ck = 0;      // backward: ceil(d_qk / 64)
  int64_t n_cv = 0;      // backward: ceil(d_v / 64)
};

// What plan() decided about the kernels to launch.
struct Geometry {
  bool bf16 = true;
  KernelGrid forward;  // forward: (b, h_q, query tile, O column chunk)
  KernelGrid delta;    // backward: rows of delta, 8 a block
  KernelGrid dkdv;     // backward: (b, h_kv, key tile, D chunk)
  KernelGrid dq;       // backward: (b, h_q, query tile, d_qk chunk)
  KernelGrid dbias;    // backward with dbias: (bias b, bias h, q tile, k tile)
  KernelGrid dsink;    // backward with dsink: one block per head
};

}  // namespace floe::detail::generic
