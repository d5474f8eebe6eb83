#include <cstring>

#include "floe/status.h"
#include "floe/tensor.h"

namespace floe {

namespace {
constexpr const char* kTensorNames[kTensorCount] = {
    "q",  "k",  "v",  "o",  "stats", "bias",  "sink",      "seq_len_q",  "seq_len_kv",
    "do", "dq", "dk", "dv", "dbias", "dsink", "offsets_q", "offsets_kv", "block_table"};
}

const char* to_string(Code code) {
  switch (code) {
    case Code::ok:
      return "ok";
    case Code::invalid_problem:
      return "invalid problem";
    case Code::not_supported:
      return "not supported";
    case Code::invalid_argument:
      return "invalid argument";
    case Code::workspace:
      return "workspace";
    case Code::device_error:
      return "device error";
    case Code::internal:
      return "internal error";
  }
  return "?";
}

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::f32:
      return "f32";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
  }
  return "?";
}

size_t size_of(DType dtype) {
  if (dtype == DType::i64) return 8;
  return (dtype == DType::f16 || dtype == DType::bf16) ? 2 : 4;
}

const char* to_string(TensorId id) {
  return kTensorNames[index_of(id)];
}

bool tensor_id_from_string(const char* name, TensorId* out) {
  for (int i = 0; i < kTensorCount; ++i) {
    if (std::strcmp(name, kTensorNames[i]) == 0) {
      *out = static_cast<TensorId>(i);
      return true;
    }
  }
  return false;
}

TensorDesc TensorDesc::packed(DType dtype, std::initializer_list<int64_t> dims) {
  TensorDesc d;
  d.dtype = dtype;
  d.rank = static_cast<int>(dims.size() > kMaxRank ? kMaxRank : dims.size());
  int i = 0;
  for (int64_t x : dims) {
    if (i < kMaxRank) d.dims[i++] = x;
  }
  // A product past 64 bits saturates: the span then overflows too, and validation refuses the
  // tensor by name instead of the strides wrapping (a signed overflow).
  int64_t stride = 1;
  for (int j = d.rank - 1; j >= 0; --j) {
    d.strides[j] = stride;
    if (stride != kSizeOverflow && __builtin_mul_overflow(stride, d.dims[j], &stride)) {
      stride = kSizeOverflow;
    }
  }
  return d;
}

TensorDesc TensorDesc::strided(DType dtype, std::initializer_list<int64_t> dims,
                               std::initializer_list<int64_t> strides) {
  TensorDesc d = packed(dtype, dims);
  int i = 0;
  for (int64_t s : strides) {
    if (i < kMaxRank) d.strides[i++] = s;
  }
  return d;
}

int64_t TensorDesc::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] <= 0) return 0;
    if (__builtin_mul_overflow(n, dims[i], &n)) return kSizeOverflow;
  }
  return n;
}

int64_t TensorDesc::span() const {
  int64_t last = 0;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] <= 0) return 0;
    int64_t reach;
    if (strides[i] < 0 || __builtin_mul_overflow(dims[i] - 1, strides[i], &reach) ||
        __builtin_add_overflow(last, reach, &last)) {
      return kSizeOverflow;
    }
  }
  return last == kSizeOverflow ? kSizeOverflow : last + 1;
}

size_t TensorDesc::span_bytes() const {
  const int64_t n = span();
  size_t bytes;
  if (n == kSizeOverflow ||
      __builtin_mul_overflow(static_cast<size_t>(n), size_of(dtype), &bytes)) {
    return static_cast<size_t>(-1);
  }
  return bytes;
}

}  // namespace floe
