// The actual lengths of each batch (P6: read on the device, so a plan serves any lengths): the
// optional i32 [b] tensors seq_len_q and seq_len_kv, through their strides. One reader for every
// engine. The struct is plain data (the planners fill it); the reader is device code.
#pragma once

#include <cstdint>

namespace floe::kernels {

struct SeqLens {
  const int32_t* q = nullptr;   // null: every batch has s_q queries
  const int32_t* kv = nullptr;  // null: every batch has s_kv keys
  int64_t q_stride = 0, kv_stride = 0;

#if defined(__CUDACC__)
  // Batch b's query and key counts. A length outside [0, s] is the caller's error; it is clamped
  // so that nothing outside the tensors is addressed.
  __device__ __forceinline__ int q_len(int b, int s_q) const {
    return read(q, q_stride, b, s_q);
  }
  __device__ __forceinline__ int kv_len(int b, int s_kv) const {
    return read(kv, kv_stride, b, s_kv);
  }

 private:
  __device__ __forceinline__ static int read(const int32_t* lens, int64_t stride, int b, int s) {
    if (lens == nullptr) return s;
    return min(max(__ldg(lens + b * stride), 0), s);
  }
#endif
};

}  // namespace floe::kernels
