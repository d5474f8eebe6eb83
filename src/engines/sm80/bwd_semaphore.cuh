// sm80 backward: the gpu-scope semaphores that order additions across CTAs (the deterministic
// dQ order, the broadcast dBias's turns). The adding CTA: every thread issues its additions, a
// barrier, then one thread publishes them with release_add (a gpu-scope release after the
// barrier is cumulative). The waiting CTA: one thread spins with load_acquire, then a barrier
// before anyone reads or adds.
#pragma once

#include <cstdint>

namespace floe::detail::sm80 {

__device__ __forceinline__ int load_acquire(const int32_t* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void release_add(int32_t* p, int v) {
  asm volatile("fence.acq_rel.gpu;\n\tred.relaxed.gpu.global.add.s32 [%0], %1;" ::"l"(p), "r"(v)
               : "memory");
}

// Spins until (*p & mask) == want; returns the value read. A broken order would spin forever: it
// fails loudly instead (2^26 reads, tens of seconds).
__device__ __forceinline__ int wait_for(const int32_t* p, int mask, int want) {
  long long spins = 0;
  int v;
  while (((v = load_acquire(p)) & mask) != want) {
    if (++spins > (1ll << 26)) __trap();
  }
  return v;
}

}  // namespace floe::detail::sm80
