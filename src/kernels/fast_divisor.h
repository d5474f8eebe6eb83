// Division of a non-negative int32 by a divisor fixed at plan time, as a multiply-high and a
// shift: the planner builds the divisor once (host), the kernel divides in three integer
// instructions instead of the two dozen of a division by a runtime value (a float reciprocal
// and its correction), which sat on the critical path of every CTA's start.
//
// For d >= 2, with l = ceil(log2 d): m = ceil(2^(31 + l) / d) fits 32 bits and
// floor(n / d) = (n * m) >> (31 + l) for every 0 <= n < 2^31. d = 1 takes m = 0 and adds n.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace floe::kernels {

struct FastDivisor {
  uint32_t d = 1;
  uint32_t mul = 0;     // m, or 0 for d = 1
  uint32_t shift = 0;   // l - 1
  uint32_t plus_n = 1;  // 1 for d = 1: the quotient is n itself

  FastDivisor() = default;
  // d >= 1 (the planner's divisors: tile counts and head counts).
  explicit FastDivisor(uint32_t divisor) : d(divisor) {
    if (divisor <= 1) return;
    uint32_t l = 0;
    while ((uint64_t{1} << l) < divisor) ++l;
    mul = static_cast<uint32_t>(((uint64_t{1} << (31 + l)) + divisor - 1) / divisor);
    shift = l - 1;
    plus_n = 0;
  }

  // n / d for 0 <= n < 2^31.
  FLOE_HD uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(n, mul);
#else
    const uint32_t hi = static_cast<uint32_t>((uint64_t{n} * mul) >> 32);
#endif
    return (hi >> shift) + n * plus_n;
  }
};

}  // namespace floe::kernels
