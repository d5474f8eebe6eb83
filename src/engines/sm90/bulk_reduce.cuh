// The bulk (non-tensor) reduce-add of sm_90: cp.reduce.async.bulk adds a contiguous run of fp32
// in shared memory into global memory element by element, in the async proxy, tracked by bulk
// groups of the issuing thread. One instruction replaces a warpgroup's thousands of per-element
// atomics, and the issuing thread waits only until the source has been read (wait_group.read)
// before the buffer may be rewritten. CuTe has the tensor (TMA descriptor) form only.
// sm_90a device code only.
#pragma once

#include <cstdint>

namespace floe::detail::sm90 {

// global[0, bytes / 4) += smem[0, bytes / 4); both 16-byte aligned, bytes a multiple of 16.
// The writers of smem fenced it for the async proxy (fence.proxy.async) before this thread saw
// them done.
__device__ __forceinline__ void bulk_reduce_add_f32(float* global, const float* smem,
                                                    uint32_t bytes) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile(
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(global),
      "r"(s), "r"(bytes)
      : "memory");
}

// global[0..3] += (a, b, c, d): one 16-byte reduction from registers (REDG.E.ADD.F32x4), 16-byte
// aligned; no bulk group.
__device__ __forceinline__ void red_add_f32x4(float* global, float a, float b, float c, float d) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(global), "f"(a), "f"(b),
               "f"(c), "f"(d)
               : "memory");
}

__device__ __forceinline__ void bulk_commit_group() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// Until at most kPending of this thread's bulk groups still read their shared-memory source.
template <int kPending>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}

// Until at most kPending of this thread's bulk groups are still in flight (writes included).
template <int kPending>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace floe::detail::sm90
