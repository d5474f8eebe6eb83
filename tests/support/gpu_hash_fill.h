// Inputs too large to build on the host: every element is a hash of its index, written on the
// device and recomputed on the host for the few rows a test checks. Values are multiples of 1/64
// in [-1, 1], exact in f16 and bf16, so the host needs no rounding model.
#pragma once

#include <cstdint>

#include "floe/plan.h"
#include "floe/status.h"
#include "floe/tensor.h"

namespace floe::test {

#if defined(__CUDACC__)
#define FLOE_TEST_HD __host__ __device__ __forceinline__
#else
#define FLOE_TEST_HD inline
#endif

// Element `index` of the stream `seed`: k / 64 for an integer k in [-64, 64].
FLOE_TEST_HD float hash_value(uint64_t index, uint64_t seed) {
  uint64_t x = index * 0x9E3779B97F4A7C15ull ^ (seed + 0x632BE59BD9B4E019ull);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 32;
  return static_cast<float>(static_cast<int>(x % 129) - 64) / 64.0f;
}

// Fills `count` f16 or bf16 elements at `ptr` (contiguous) with hash_value(i, seed), on `stream`.
Status fill_hashed(void* ptr, DType dtype, int64_t count, uint64_t seed, Stream stream);

}  // namespace floe::test
