// Device-side element access for f16 / bf16 tensors addressed through arbitrary element
// strides (P4). CUDA-only header: include it from .cu files.
//
// Elements travel as raw 16-bit words (uint16_t) until they are widened to fp32, so that one
// code path serves both dtypes: Elem<T> says how to widen and how to round back.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace floe::detail::tile {

template <class T>
struct Elem;

template <>
struct Elem<__nv_bfloat16> {
  // bf16 -> f32 is exact: the 16 bits are the high half of the float.
  static __device__ __forceinline__ float to_float(uint16_t raw) {
    return __uint_as_float(static_cast<uint32_t>(raw) << 16);
  }
  static __device__ __forceinline__ uint16_t from_float(float x) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
  }
};

template <>
struct Elem<__half> {
  static __device__ __forceinline__ float to_float(uint16_t raw) {
    return __half2float(__ushort_as_half(raw));
  }
  static __device__ __forceinline__ uint16_t from_float(float x) {
    return __half_as_ushort(__float2half_rn(x));
  }
};

// Read-only load of one raw element through the non-coherent path.
__device__ __forceinline__ uint16_t load_raw(const uint16_t* p) {
  return __ldg(p);
}

template <class T>
__device__ __forceinline__ float load_elem(const uint16_t* base, int64_t offset) {
  return Elem<T>::to_float(load_raw(base + offset));
}

template <class T>
__device__ __forceinline__ void store_elem(uint16_t* base, int64_t offset, float x) {
  base[offset] = Elem<T>::from_float(x);
}

// A 2-D window of a strided tensor: element (r, c) lives at ptr[r * rs + c * cs]; elements
// with r >= rows or c >= cols are outside the window (read as 0, never addressed). Extents
// are below 2^31 (validation bounds every dim), offsets are 64-bit.
// A window whose rows are not evenly strided (a tile of keys from a paged cache) gives each
// row's offset from ptr in `row` (shared memory, one entry per row of the tile); rs is unused.
struct View2D {
  const uint16_t* ptr;
  int64_t rs, cs;
  int rows, cols;
  const int64_t* row;
};

__device__ __forceinline__ View2D make_view(const uint16_t* ptr, int64_t rs, int64_t cs,
                                            int64_t rows, int64_t cols) {
  return View2D{ptr, rs, cs, static_cast<int>(rows), static_cast<int>(cols), nullptr};
}

__device__ __forceinline__ View2D make_row_view(const uint16_t* ptr, const int64_t* row, int64_t cs,
                                                int64_t rows, int64_t cols) {
  return View2D{ptr, 0, cs, static_cast<int>(rows), static_cast<int>(cols), row};
}

}  // namespace floe::detail::tile
