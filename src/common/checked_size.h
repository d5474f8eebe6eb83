// Size arithmetic that cannot wrap (DESIGN 2: sizes, spans and workspace bytes are checked for
// 64-bit overflow). Products saturate at the type's maximum, which no valid size reaches, so a
// saturated result is refused where it is checked instead of passing as a small number.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>

namespace floe::detail {

inline constexpr size_t kSizeSaturated = std::numeric_limits<size_t>::max();

// a * b, or false when it overflows int64 (out is then unspecified).
inline bool checked_mul(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}
inline bool checked_add(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

// The product of non-negative factors in bytes, saturating at kSizeSaturated (a negative factor
// saturates too: it can only come from a size that already wrapped).
inline size_t saturating_bytes(std::initializer_list<int64_t> factors) {
  size_t r = 1;
  for (int64_t f : factors) {
    if (f < 0 || __builtin_mul_overflow(r, static_cast<size_t>(f), &r)) return kSizeSaturated;
  }
  return r;
}

inline size_t saturating_add(size_t a, size_t b) {
  size_t r;
  return __builtin_add_overflow(a, b, &r) ? kSizeSaturated : r;
}

}  // namespace floe::detail
