// Tensor descriptions: element type, logical dims and element strides. floe never copies a
// tensor into a layout it prefers; kernels address these strides directly (P4).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace floe {

enum class DType : uint8_t { f16, bf16, f32, i32, i64 };

const char* to_string(DType dtype);
size_t size_of(DType dtype);

// Every tensor a problem can name. The order is the order of Arguments and of messages.
enum class TensorId : uint8_t {
  q,
  k,
  v,
  o,
  stats,
  bias,
  sink,
  seq_len_q,
  seq_len_kv,  // forward operands
  d_o,
  dq,
  dk,
  dv,
  dbias,
  dsink,  // backward only
  // Ragged and paged problems (DESIGN 2.1, 2.2): device arrays read at execute, either direction.
  offsets_q,    // [B + 1] i32 or i64, token offsets of the packed query side
  offsets_kv,   // [B + 1] i32 or i64, token offsets of the packed key side
  block_table,  // [B, max_pages] i32, the pages of each batch's keys and values
};
inline constexpr int kTensorCount = 18;
inline constexpr int index_of(TensorId id) {
  return static_cast<int>(id);
}

// "q", "k", ..., "do", "dq", ...: the names used in messages, case files and strides.
const char* to_string(TensorId id);
// Parses the names above; returns false for an unknown name.
bool tensor_id_from_string(const char* name, TensorId* out);

struct TensorDesc {
  static constexpr int kMaxRank = 4;

  DType dtype = DType::bf16;
  int rank = 0;
  std::array<int64_t, kMaxRank> dims{};
  std::array<int64_t, kMaxRank> strides{};  // in elements

  // Dense, C-order (last dim fastest).
  static TensorDesc packed(DType dtype, std::initializer_list<int64_t> dims);
  static TensorDesc strided(DType dtype, std::initializer_list<int64_t> dims,
                            std::initializer_list<int64_t> strides);

  // What numel() and span() return when the true value does not fit int64 (or, for span(), a
  // stride is negative); span_bytes() returns SIZE_MAX then, or when the bytes do not fit.
  // Validation refuses such tensors, so a valid problem never sees these values.
  static constexpr int64_t kSizeOverflow = INT64_MAX;

  int64_t numel() const;
  // Elements from the base pointer to one past the last addressed element: the allocation a
  // caller needs.
  int64_t span() const;
  size_t span_bytes() const;
};

}  // namespace floe
