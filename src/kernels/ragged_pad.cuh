// The rows of a ragged side's slot past the envelope (a slot wider than s_q or s_kv): padding
// that no tile of an engine's kernels reaches, so that each engine's pad kernel writes it here,
// one block a batch (DESIGN 2.1): the output rows 0, their stats -inf. Device code over a small
// view of one output that every engine's params give.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/ragged_rows.h"

namespace floe::kernels {

// An output of 2-byte elements (f16, bf16: 0 is all bits clear) as [., heads, rows, cols]
// through its element strides (a ragged side's batch stride is 0, unused here), and its stats
// [., heads, rows] (nullptr: none to write).
struct PadRows {
  uint16_t* data = nullptr;
  int64_t head_stride = 0, row_stride = 0, col_stride = 0;
  int64_t heads = 0, cols = 0;
  float* stats = nullptr;
  int64_t stats_head_stride = 0, stats_row_stride = 0;
};

#if defined(__CUDACC__)
// The block writes the rows [slot.start + envelope, slot.end) of `out`.
__device__ inline void pad_slot_rows(const Slot& slot, int64_t envelope, const PadRows& out) {
  const int64_t first = slot.start + envelope;
  if (first >= slot.end) return;
  const int64_t n = (slot.end - first) * out.heads * out.cols;
  for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
    const int64_t c = e % out.cols, h = e / out.cols % out.heads,
                  r = first + e / out.cols / out.heads;
    out.data[h * out.head_stride + r * out.row_stride + c * out.col_stride] = 0;
    if (out.stats != nullptr && c == 0) {
      out.stats[h * out.stats_head_stride + r * out.stats_row_stride] = -INFINITY;
    }
  }
}
#endif

}  // namespace floe::kernels
