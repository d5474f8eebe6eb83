// The plan-time reading of a ragged side and of the paged cache (kernels/ragged_rows.h) from a
// validated problem's facts: index type, strides and sizes. Every engine that serves ragged or
// paged problems starts from these; the device pointers are filled per launch (the tensor-core
// engines' kernels::ServingRows: serving_rows, then set_serving_pointers).
#pragma once

#include <algorithm>
#include <cstdint>

#include "engines/facts.h"
#include "floe/arguments.h"
#include "kernels/ragged_rows.h"
#include "kernels/sm80/serving_rows.h"

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

// The plan-time half of the tensor-core engines' kernels::ServingRows (sm80's serving kernels,
// sm90's): the flags, the ragged sides, the page table's strides, the page count and divisor.
// block_n: the kernel's key tile (tile_in_page: a page holds whole tiles, sm80's one-base load).
inline kernels::ServingRows make_serving_rows(const Facts& f, int block_n) {
  kernels::ServingRows s;
  s.ragged_q = f.ragged_q;
  s.ragged_kv = f.ragged_kv;
  s.paged_kv = f.paged_kv;
  if (f.ragged_q) s.q = ragged_side(f, /*query=*/true);
  if (f.ragged_kv) s.kv = ragged_side(f, /*query=*/false);
  if (f.paged_kv) {
    const kernels::PagedSide pages = paged_side(f);
    s.table_stride_b = pages.table_stride_b;
    s.table_stride_p = pages.table_stride_p;
    s.k_page_stride = f.t(TensorId::k).strides[0];
    s.v_page_stride = f.t(TensorId::v).strides[0];
    s.num_pages = static_cast<int32_t>(std::min<int64_t>(pages.num_pages, INT32_MAX));
    s.page_size = kernels::FastDivisor(static_cast<uint32_t>(pages.page_size));
    s.tile_in_page = f.page_size % block_n == 0;
  }
  return s;
}

// Launch time: the offsets, valid lengths and block table of one execute.
inline void set_serving_pointers(const Facts& f, const Arguments& args, kernels::ServingRows& s) {
  if (f.ragged_q) {
    s.q.offsets = args.get(TensorId::offsets_q);
    if (f.has(TensorId::seq_len_q)) {
      s.q.seq_len = static_cast<const int32_t*>(args.get(TensorId::seq_len_q));
    }
  }
  if (f.ragged_kv) {
    s.kv.offsets = args.get(TensorId::offsets_kv);
    if (f.has(TensorId::seq_len_kv)) {
      s.kv.seq_len = static_cast<const int32_t*>(args.get(TensorId::seq_len_kv));
    }
  }
  if (f.paged_kv) s.table = static_cast<const int32_t*>(args.get(TensorId::block_table));
}

}  // namespace floe::detail
