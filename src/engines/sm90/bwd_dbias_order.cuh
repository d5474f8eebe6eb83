// sm90 backward, deterministic mode (P7) with a dBias summed over a broadcast dim: the order in
// which the (batch, head) pairs of the sum add their dS into one fp32 tile of "dbias_accum".
// fp32 addition is not associative, so the vector reductions into a tile come in one order in
// every run: the pairs' order in the sum, b * h_q + h over the summed dims (the turn below).
//
// Every pair of the sum takes its turn at every tile, visiting it or not (past its lengths,
// outside the band): a count per tile ("dbias_semaphore", zeroed by the preprocess of the same
// execute) says how many pairs have. The turns are kept by one warp of the producer warpgroup
// (the turn keeper, keep_dbias_turns), off the consumers' path: per visit it waits for the pair's
// turn at the tile (acquire, gpu scope) while the consumers compute, hands it to them through an
// mbarrier ("dbias_turn", waited just before their reductions), meets them at a named barrier
// they only arrive at once their reductions are issued, and passes the turn (a cumulative release,
// whose fence.acq_rel.gpu waits for those reductions: where a consumer thread passed it, that
// MEMBAR.GPU stalled warpgroup 0 before dQ's product every visit, x1.22 the default's time at
// b4 h16 s4096 d128 bias [1,16]). It signals a visit's turn only after passing the one before, so
// one mbarrier phase is outstanding at a time and the named barrier never sees two visits'
// arrivals. The tiles a CTA does not visit it passes without adding, after its visits. (Where the
// pairs' lengths differ, a pair that visits a tile may so wait on the whole loop of one before it
// that does not.)
//
// Progress: a pair only waits on the pairs before it in the sum at its own key tile, and the
// grid (KeyTileScheduler kDescending, the pairs of a sum the fast index of a section, sections
// in the sum's order) hands those out first; the dQ turns (bwd_dq_order.cuh) wait on higher key
// tiles of the same pair, handed out before as well. The lowest-index CTA that has not finished
// waits on nobody unfinished, so every wait ends. GQA with a sum over the heads is declined
// (bwd_plan.cc): a CTA visits its group's heads one after the other, so the turn of the next
// group would wait on the whole visit loop of the previous one.
#pragma once

#include <cstdint>

#include "common/host_device.h"
#include "engines/sm90/bwd_params.h"
#include "kernels/band_tiles.cuh"
#if defined(__CUDACC__)
#include "engines/sm90/bwd_dq_order.cuh"  // dq_pass_turn_after_generic: the hand-on of both sums
#include "engines/sm90/bwd_producer.cuh"  // Barrier, Visits, VisitCursor
#endif

namespace floe::detail::sm90::bwd {

// The turns' arithmetic is host and device code, so that tests/cpu/sm90_dbias_turns_test.cc
// replays the protocol over the plan's grid; the semaphore accesses below are device code only.

// The tile of the accumulator that head h, batch b adds into at (m_block, n_block).
FLOE_HD int64_t dbias_tile_index(const BwdParams& p, int h, int b, int m_block, int n_block) {
  return ((static_cast<int64_t>(b * p.dbias_b_step) * p.dbias_h + h * p.dbias_h_step) *
              p.num_m_blocks +
          m_block) *
             p.num_n_blocks +
         n_block;
}

// The place of pair (b, h) in the sum: the pairs before it over the summed dims.
FLOE_HD int dbias_turn(const BwdParams& p, int h, int b) {
  const int b_term = p.dbias_b_step == 0 ? b : 0;
  const int h_term = p.dbias_h_step == 0 ? h : 0;
  return b_term * (p.dbias_h_step == 0 ? p.h_q : 1) + h_term;
}

#if defined(__CUDACC__)
// Until the tile's count says it is this pair's turn (acquire, gpu scope: the pairs before's
// reductions are then visible to this thread's). Where it does not end within tens of seconds (a
// broken order) the kernel faults instead of hanging the device: by a misaligned store, not a
// trap, which in the consumers' loop made ptxas spill their accumulators (1.2 KB a thread at
// d128m64, where the store leaves the 4 bytes of before).
__device__ __forceinline__ void dbias_wait_turn(const int32_t* sem, int turn) {
  int32_t now;
  int spins = 0;
  do {
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(now) : "l"(sem) : "memory");
  } while (now != turn && ++spins < (1 << 26));
  if (now != turn) {
    *reinterpret_cast<volatile int32_t*>(reinterpret_cast<uintptr_t>(sem) + 1) = now;
  }
}

// One thread, after the visits: the turns of the tiles of key tile n_block this CTA does not
// visit, for every query head of its group. Waits for each turn (acquire) and passes it
// (dq_pass_turn_after_generic, as a visit's turn): nothing is added there.
__device__ __forceinline__ void dbias_pass_unvisited(const BwdParams& p,
                                                     const kernels::QueryTiles& qt, int n_block,
                                                     int h_kv, int b) {
  for (int g = 0; g < p.group; ++g) {
    const int h = h_kv * p.group + g;
    const int turn = dbias_turn(p, h, b);
    for (int m_block = 0; m_block < p.num_m_blocks; ++m_block) {
      if (!qt.empty() && m_block >= qt.begin && m_block < qt.end) continue;
      int32_t* sem = p.dbias_sem + dbias_tile_index(p, h, b, m_block, n_block);
      dbias_wait_turn(sem, turn);
      dq_pass_turn_after_generic(sem);
    }
  }
}

// The named barrier at which the consumers, their reductions of a visit issued, meet the turn
// keeper (bwd_kernel.cuh's kConsumersBarrier is 0).
inline constexpr int kDbiasAddedBarrier = 1;

// The turn keeper: a whole warp of the producer warpgroup (the named barrier counts warps), lane 0
// polling and passing. `turn` is the mbarrier the consumers wait on, parity v & 1 at visit v.
template <int kConsumerThreads>
__device__ __forceinline__ void keep_dbias_turns(const BwdParams& p, uint64_t* turn,
                                                 const Visits& visits,
                                                 const kernels::QueryTiles& qt, int n_block,
                                                 int h_kv, int b, int lane) {
  VisitCursor at(visits);
  CUTE_NO_UNROLL
  for (int v = 0; v < visits.count; ++v, at.next(visits)) {
    int32_t* sem = p.dbias_sem + dbias_tile_index(p, at.h, b, at.m_block, n_block);
    if (lane == 0) {
      dbias_wait_turn(sem, dbias_turn(p, at.h, b));
      Barrier::arrive(turn);  // release, CTA scope: the acquire above is cumulative through it
    }
    __syncwarp();
    cutlass::arch::NamedBarrier::sync(kConsumerThreads + 32, kDbiasAddedBarrier);
    if (lane == 0) dq_pass_turn_after_generic(sem);
  }
  if (lane == 0) dbias_pass_unvisited(p, qt, n_block, h_kv, b);
}

#endif  // __CUDACC__

}  // namespace floe::detail::sm90::bwd
