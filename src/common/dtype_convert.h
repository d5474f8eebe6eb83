// f16 / bf16 <-> float on the host, round to nearest even, no CUDA headers needed.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "floe/tensor.h"

namespace floe::detail {

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_to_bits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN, sign kept
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_float(uint16_t h) {
  return bits_to_float(static_cast<uint32_t>(h) << 16);
}

inline uint16_t float_to_f16(float f) {
  const uint32_t u = float_to_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000;
  const uint32_t absu = u & 0x7FFFFFFF;
  if (absu > 0x7F800000) return static_cast<uint16_t>(sign | 0x7E00);   // NaN
  if (absu >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);  // rounds to inf
  if (absu < 0x38800000) {  // subnormal or zero in f16: f16 ulp there is 2^-24
    const float a = bits_to_float(absu);
    const float scaled = a * 16777216.0f;                          // exact: a * 2^24
    const auto m = static_cast<uint32_t>(std::nearbyint(scaled));  // RNE in the default mode
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t mant = absu & 0x7FFFFF;
  uint32_t exp = (absu >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}
inline float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  const uint32_t mant = h & 0x3FF;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_to_float(sign | 0x7F800000 | (mant << 13));
  return bits_to_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

// Reads element `offset` (in elements) of a buffer of `dtype` as float.
inline float load_as_float(const void* base, int64_t offset, DType dtype) {
  switch (dtype) {
    case DType::f16:
      return f16_to_float(static_cast<const uint16_t*>(base)[offset]);
    case DType::bf16:
      return bf16_to_float(static_cast<const uint16_t*>(base)[offset]);
    case DType::f32:
      return static_cast<const float*>(base)[offset];
    case DType::i32:
      return static_cast<float>(static_cast<const int32_t*>(base)[offset]);
    case DType::i64:
      return static_cast<float>(static_cast<const int64_t*>(base)[offset]);
  }
  return 0.f;
}

// Writes `value` rounded to `dtype` at element `offset`.
inline void store_from_float(void* base, int64_t offset, DType dtype, float value) {
  switch (dtype) {
    case DType::f16:
      static_cast<uint16_t*>(base)[offset] = float_to_f16(value);
      break;
    case DType::bf16:
      static_cast<uint16_t*>(base)[offset] = float_to_bf16(value);
      break;
    case DType::f32:
      static_cast<float*>(base)[offset] = value;
      break;
    case DType::i32:
      static_cast<int32_t*>(base)[offset] = static_cast<int32_t>(value);
      break;
    case DType::i64:
      static_cast<int64_t*>(base)[offset] = static_cast<int64_t>(value);
      break;
  }
}

// The value `x` takes once rounded to `dtype`.
inline float round_to(DType dtype, float x) {
  switch (dtype) {
    case DType::f16:
      return f16_to_float(float_to_f16(x));
    case DType::bf16:
      return bf16_to_float(float_to_bf16(x));
    default:
      return x;
  }
}

}  // namespace floe::detail
