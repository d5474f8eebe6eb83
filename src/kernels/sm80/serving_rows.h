// The rows of one batch for a tensor-core kernel that serves ragged (packed) sides and paged
// KV caches natively (DESIGN 2.1, 2.2): where the batch's query and key rows start in the
// packed tensors, how many are real, how many of the slot the kernel writes, and the page of a
// key. Plain data built at plan time (the pointers at launch); the readers are device code. The
// tensors of a ragged side keep their [T, H, D] strides as Strides3 {b = 0, h, s = token}, so a
// kernel's dense addressing plus `q0` / `kv0` rows is the ragged addressing; paged K and V keep
// {b = 0, h, s = row in the page} and add the page's base per key.
#pragma once

#include <cstdint>

#include "common/host_device.h"
#include "kernels/fast_divisor.h"
#include "kernels/ragged_rows.h"
#include "kernels/seq_lens.cuh"

namespace floe::kernels {

struct ServingRows {
  bool ragged_q = false, ragged_kv = false, paged_kv = false;
  RaggedSide q, kv;  // the offsets (and valid lengths) filled at launch
  // Paged: key j of batch b is row j % P of page table[b, j / P].
  const int32_t* table = nullptr;
  int64_t table_stride_b = 0, table_stride_p = 0;
  int64_t k_page_stride = 0, v_page_stride = 0;  // element strides of K's and V's page dim
  int32_t num_pages = 1;
  FastDivisor page_size;
  // The planner's choice: P is a multiple of the kernel's key tile, so that one page holds a
  // whole tile and the tile is one base plus the row stride (the dense load).
  bool tile_in_page = false;
};

// Batch b's rows. q0 / kv0: the slot's first token (0 on a dense side); sq / skv: the real
// rows; q_rows / kv_rows: the rows of the slot the tile grid covers (padding included, at most
// the envelope); q_slot / kv_slot: the slot's width (rows past the envelope, up to it, are
// padding that the CTAs of the last tile zero).
struct BatchRows {
  int64_t q0, kv0;
  int sq, skv, q_rows, kv_rows, q_slot, kv_slot;
};

#if defined(__CUDACC__)
__device__ __forceinline__ BatchRows batch_rows(const ServingRows& s, const SeqLens& lens, int b,
                                                int s_q, int s_kv) {
  BatchRows r;
  if (s.ragged_q) {
    const Slot sl = s.q.slot(b);
    r.q0 = sl.start;
    r.sq = static_cast<int>(sl.len);
    r.q_slot = static_cast<int>(sl.end - sl.start < INT32_MAX ? sl.end - sl.start : INT32_MAX);
    r.q_rows = min(r.q_slot, s_q);
  } else {
    r.q0 = 0;
    r.sq = lens.q_len(b, s_q);
    r.q_rows = r.q_slot = s_q;
  }
  if (s.ragged_kv) {
    const Slot sl = s.kv.slot(b);
    r.kv0 = sl.start;
    r.skv = static_cast<int>(sl.len);
    r.kv_slot = static_cast<int>(sl.end - sl.start < INT32_MAX ? sl.end - sl.start : INT32_MAX);
    r.kv_rows = min(r.kv_slot, s_kv);
  } else {
    r.kv0 = 0;
    r.skv = lens.kv_len(b, s_kv);
    r.kv_rows = r.kv_slot = s_kv;
  }
  return r;
}

// The page holding key j (< the batch's key length) of batch b, clamped into the cache.
__device__ __forceinline__ int64_t page_of(const ServingRows& s, int b, int j, int* row) {
  const int idx = static_cast<int>(s.page_size.div(static_cast<uint32_t>(j)));
  *row = j - idx * static_cast<int>(s.page_size.d);
  const int32_t page = __ldg(s.table + b * s.table_stride_b + idx * s.table_stride_p);
  return page < 0 ? 0 : (page >= s.num_pages ? s.num_pages - 1 : page);
}
#endif

}  // namespace floe::kernels
