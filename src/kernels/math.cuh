// Small device math for the attention kernels of every tensor-core engine: the MUFU exp2 / log2 /
// reciprocal and the reductions over the four lanes (a "quad") that share one accumulator row (of
// an m16n8 MMA on sm80; a GMMA accumulator spreads its rows over quads the same way).
#pragma once

#include <cstdint>

#include "kernels/constants.h"

namespace floe::kernels {

// 2^x on the special-function unit (relative error about 2^-22; exp2(-inf) = +0, exp2(+inf) =
// +inf).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 1/x on the special-function unit (about 1 ulp; 1/inf = 0).
__device__ __forceinline__ float fast_rcp(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// log2(x) on the special-function unit (absolute error about 2^-22 near 1, relative elsewhere;
// log2(0) = -inf).
__device__ __forceinline__ float fast_log2(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Lanes 4g .. 4g+3 hold the same accumulator rows: reduce across them, every lane gets the result.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
  return x;
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  return x;
}

// x, but opaque to the optimiser: values derived from it inside a loop are recomputed there
// instead of being hoisted out and kept live (or spilled) across the loop.
__device__ __forceinline__ int opaque(int x) {
  asm volatile("" : "+r"(x));
  return x;
}

// a + b, saturated to the int32 range (the open sides of a band are INT32_MIN / INT32_MAX).
__device__ __forceinline__ int add_sat(int a, int b) {
  int r;
  asm("add.sat.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

}  // namespace floe::kernels
