// The plan-time reading of a ragged side and of the paged cache (kernels/ragged_rows.h) from a
// validated problem's facts: index type, strides and sizes. Every engine that serves ragged or
// paged problems starts from these; the device pointers are filled per launch.
#pragma once

#include <cstdint>

#include "engines/facts.h"
#include "kernels/ragged_rows.h"

namespace floe::detail {

// The query side (offsets_q, seq_len_q) or the key side (offsets_kv, seq_len_kv).
inline kernels::RaggedSide ragged_side(const Facts& f, bool query) {
  const TensorId offsets = query ? TensorId::offsets_q : TensorId::offsets_kv;
  const TensorId seq_len = query ? TensorId::seq_len_q : TensorId::seq_len_kv;
  kernels::RaggedSide side;
  side.offsets_i64 = f.t(offsets).dtype == DType::i64;
  side.offsets_stride = f.t(offsets).strides[0];
  side.seq_len_stride = f.has(seq_len) ? f.t(seq_len).strides[0] : 0;
  side.total = query ? f.total_q : f.total_kv;
  side.envelope = query ? f.s_q : f.s_kv;
  return side;
}

inline kernels::PagedSide paged_side(const Facts& f) {
  kernels::PagedSide side;
  side.table_stride_b = f.t(TensorId::block_table).strides[0];
  side.table_stride_p = f.t(TensorId::block_table).strides[1];
  side.page_size = f.page_size;
  side.num_pages = f.num_pages;
  return side;
}

}  // namespace floe::detail
