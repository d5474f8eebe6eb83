// sm90 backward, deterministic mode (P7): the order in which the key tiles that visit one query
// tile add their dQ shares into its fp32 accumulator. fp32 addition is not associative, so the
// bulk reduce-adds of one tile must come in the same order in every run; the tiles of different
// query tiles stay unordered against each other.
//
// The order is descending key tiles: key tile n adds after every higher key tile that visits the
// query tile. A CTA walks its query tiles upwards and, under a band bounded on the right (causal,
// windows), a higher key tile starts at a higher query tile, so it reaches a given query tile
// first: in this order the waits are short, where the ascending order would hold the key tile
// next to the diagonal until key tile 0 had walked up to it. Without a right bound every key tile
// starts at query tile 0 and the two orders are alike.
//
// Progress: a CTA only waits on CTAs of its own (kv head, batch) with higher key tiles, and the
// main kernel's grid hands those out first (KeyTileScheduler descending). The lowest-index CTA
// that has not finished is therefore resident (the hardware dispatches a one-dimensional grid in
// index order) and waits on nobody unfinished, so every wait ends. A wait that does not end within
// tens of seconds (a broken order) traps instead of hanging the device.
//
// Per query tile a semaphore (the "dq_semaphore" chunk, zeroed by the preprocess of the same
// execute) counts the key tiles that have added. The reducer thread waits until it equals its
// turn, issues its bulk reduce-adds, waits until they have completed (written, not only read:
// cp.async.bulk.wait_group 0) and then releases the count at gpu scope.
#pragma once

#include <cstdint>

#include "engines/sm90/bwd_params.h"
#include "kernels/band_tiles.cuh"

namespace floe::detail::sm90::bwd {

__device__ __forceinline__ int32_t* dq_semaphore(const BwdParams& p, int b, int h, int m_block) {
  return p.dq_sem + (static_cast<int64_t>(b) * p.h_q + h) * p.num_m_blocks + m_block;
}

// How many key tiles add into query tile m_block before key tile n_block, which visits it
// (kernels::key_tiles_above: the same visitors query_tiles() gives from the key side).
template <int kBlockM, int kBlockN>
__device__ __forceinline__ int dq_turn(const BwdParams& p, int m_block, int n_block, int sq_b,
                                       int skv_b) {
  const int row_last = min((m_block + 1) * kBlockM, sq_b) - 1;
  return kernels::key_tiles_above(p.score.mask, p.score.has_mask, row_last, n_block, sq_b, skv_b,
                                  kBlockN);
}

// Until the tile's count says it is this key tile's turn (acquire, gpu scope).
__device__ __forceinline__ void dq_wait_turn(const int32_t* sem, int turn) {
  long long spins = 0;
  for (;;) {
    int32_t now;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(now) : "l"(sem) : "memory");
    if (now == turn) break;
    if (++spins > (1ll << 26)) __trap();  // tens of seconds: a broken order, fail loudly
  }
  // The bulk reduce-adds that follow run in the async proxy: ordered after the acquire.
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

// The next key tile's turn, once this thread's bulk reduce-adds into the tile have completed
// (bulk_wait_group<0>): the proxy fence orders their (async-proxy) writes before this thread's
// generic accesses, and the release add, cumulative, publishes them with the count at gpu scope.
// (5cbb7fc had a __threadfence() before it, a second MEMBAR.GPU a visit, and no grid sections:
// 1.31x the default's time at d128 S 4096, 1.26x at d64 S 16k; without both, ac98cde: 1.05x and
// 1.12x; H200, BACKWARD.md.)
__device__ __forceinline__ void dq_pass_turn(int32_t* sem) {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;\n" ::"l"(sem) : "memory");
}

// The same for reductions issued by many threads in the generic proxy (bwd_wide_kernel.cuh's
// red.global.add, the summed dBias's vector reductions: bwd_dbias_order.cuh): the caller has met
// every adding thread at a barrier after its reductions (an mbarrier or a named barrier: release,
// acquire at CTA scope), so that this thread's release fence is cumulative over them (CUTLASS's
// barrier release: fence.acq_rel.gpu, then a relaxed add).
__device__ __forceinline__ void dq_pass_turn_after_generic(int32_t* sem) {
  asm volatile(
      "fence.acq_rel.gpu;\n"
      "red.relaxed.gpu.global.add.s32 [%0], 1;\n" ::"l"(sem)
      : "memory");
}

}  // namespace floe::detail::sm90::bwd
