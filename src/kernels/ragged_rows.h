// Where the rows of one batch live in a ragged (packed) or paged tensor (DESIGN 2.1, 2.2): the
// one reading of token offsets, valid lengths and block tables that every engine shares, so
// that they all clamp bad device data the same way. Plain data filled by the planners; the
// readers run on the host (reference) and on the device.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace floe::kernels {

// Batch b's slot of a packed side: tokens [start, end); the first `len` are its rows, the rest
// are padding. start and end are clamped to [0, total] (end >= start), len to the slot and to
// the envelope: whatever the device arrays hold, no row lies outside the tensor or overlaps
// the next slot.
struct Slot {
  int64_t start = 0, end = 0, len = 0;
};

struct RaggedSide {
  const void* offsets = nullptr;  // [B + 1], i32 or i64, through offsets_stride
  bool offsets_i64 = false;
  int64_t offsets_stride = 1;
  const int32_t* seq_len = nullptr;  // optional valid lengths [B], through seq_len_stride
  int64_t seq_len_stride = 0;
  int64_t total = 0;     // tokens in the packed tensor
  int64_t envelope = 0;  // the longest sequence the plan serves (s_q or s_kv)

  FLOE_HD int64_t offset(int64_t i) const {
    return offsets_i64 ? static_cast<const int64_t*>(offsets)[i * offsets_stride]
                       : static_cast<const int32_t*>(offsets)[i * offsets_stride];
  }
  FLOE_HD int64_t start(int64_t b) const { return clamp(offset(b), 0, total); }
  FLOE_HD Slot slot(int64_t b) const {
    Slot s;
    s.start = start(b);
    s.end = clamp(offset(b + 1), s.start, total);
    s.len = s.end - s.start;
    if (seq_len != nullptr) s.len = clamp(seq_len[b * seq_len_stride], 0, s.len);
    if (s.len > envelope) s.len = envelope;
    return s;
  }

  static FLOE_HD int64_t clamp(int64_t x, int64_t lo, int64_t hi) {
    return x < lo ? lo : (x > hi ? hi : x);
  }
};

// Keys and values in pages: key j of batch b is row j % page_size of page
// table[b, j / page_size]. A page number outside [0, num_pages) is the caller's error; it is
// clamped so that nothing outside the cache is read.
struct PagedSide {
  const int32_t* table = nullptr;  // [B, max_pages] through its strides
  int64_t table_stride_b = 0, table_stride_p = 0;
  int64_t page_size = 1, num_pages = 1;

  FLOE_HD int64_t page(int64_t b, int64_t j) const {
    const int64_t p = table[b * table_stride_b + (j / page_size) * table_stride_p];
    return p < 0 ? 0 : (p >= num_pages ? num_pages - 1 : p);
  }
};

}  // namespace floe::kernels
