// decode engine: split-KV attention for short query sides (s_q <= 16), memory-bound.
//
// One CTA per (batch, kv head, split, 16 packed rows). The rows are the (query, head-in-group)
// pairs of one kv head, so a decode step of GQA 32/8 puts 4 heads into one MMA's M and reads
// each key once. Four warps each take 16 keys of every 64-key tile; K and V tiles stream
// through a cp.async pipeline of 16-byte row chunks (a paged row's address comes from the
// block table), into XOR-swizzled shared memory that ldmatrix reads without bank conflicts.
// Paged: the table entries travel by cp.async too, kAhead tiles before their rows, into a ring
// in shared memory, so that no copy waits on a table read (the loaded memory latency, ~2 us).
// Each warp keeps its own online softmax; the warps merge in a fixed order at the end.
//
// Splits follow the device lengths (decode_params.h): every CTA reads the B lengths, lays the
// batches' key tiles end to end (a block scan), takes a quota of total / CTAs and attends to
// its chunk's pieces, with no host read, so one captured graph serves every length vector of
// the envelope and a skewed batch spreads its longest sequence over many CTAs. Batch-invariant:
// splits at multiples of split_tokens. A batch that needs one split is written directly by that
// CTA; the others write fp32 partials (O normalised, lse) into the workspace and count their
// arrival on the unit's counter; the CTA that arrives last merges them in key order
// (kernels/lse_merge.h) and folds in the sink, so no second kernel runs after the grid. Every
// order is fixed (the merge does not depend on which CTA runs it): results are bitwise
// deterministic for the same lengths.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "engines/decode/decode_kernels.h"
#include "kernels/constants.h"
#include "kernels/lse_merge.h"
#include "kernels/math.cuh"
#include "kernels/ragged_pad.cuh"

namespace floe::detail::decode {
namespace {

using kernels::kLn2;
using kernels::kLog2e;

// ---- Per-batch geometry, one definition for the pieces and the merge. -----------------------

struct Batch {
  int sq = 0;      // valid queries
  int q_rows = 0;  // rows the plan owns in this batch's slot (s_q, or the slot up to s_q)
  int64_t q0 = 0;  // first token of the slot (ragged), else 0
  int skv = 0;     // valid keys
  int64_t kv0 = 0;
  int kb = 0, ke = 0;  // keys any query can see: [kb, ke)
  int off = 0;         // the mask's diagonal offset
  // Splits: the batch's non-empty splits are first, first + 1, ..., first + count - 1.
  int first = 0, count = 0;
  int tiles = 0;  // 64-key tiles of [kb, ke)
};

__device__ __forceinline__ int clamp_int(int64_t x, int64_t lo, int64_t hi) {
  return static_cast<int>(x < lo ? lo : (x > hi ? hi : x));
}

__device__ Batch batch_of(const Params& p, int b) {
  Batch t;
  if (p.ragged_q) {
    const kernels::Slot s = p.rq.slot(b);
    t.q0 = s.start;
    t.sq = static_cast<int>(s.len);
    t.q_rows = static_cast<int>(min(s.end - s.start, static_cast<int64_t>(p.s_q)));
  } else {
    t.sq = p.lens.q_len(b, p.s_q);
    t.q_rows = p.s_q;
  }
  if (p.ragged_kv) {
    const kernels::Slot s = p.rkv.slot(b);
    t.kv0 = s.start;
    t.skv = static_cast<int>(s.len);
  } else {
    t.skv = p.lens.kv_len(b, p.s_kv);
  }
  t.off = static_cast<int>(p.band.offset(t.sq, t.skv));
  if (t.sq > 0) {
    t.kb = clamp_int(p.band.first_key(0, t.off), 0, t.skv);
    t.ke = clamp_int(p.band.last_key(t.sq - 1, t.off) + 1, 0, t.skv);
  }
  if (t.ke <= t.kb) return t;  // no visible key: count 0
  t.tiles = (t.ke + kBlockN - 1) / kBlockN - t.kb / kBlockN;
  if (p.split_tokens > 0) {
    const int64_t n = p.split_tokens;
    t.first = static_cast<int>(t.kb / n);
    t.count = static_cast<int>((t.ke + n - 1) / n) - t.first;
  }  // dynamic: the pieces come from the schedule
  return t;
}

// ---- The dynamic schedule (decode_params.h), computed alike by every CTA. -------------------
//
// The batches' key tiles laid end to end (batch order) are cut into chunks of `quota` tiles,
// chunk c for CTA c of every (kv head, row tile): a CTA takes the pieces of the batches its
// chunk overlaps, so no CTA reads more than quota tiles whatever the lengths. An empty batch
// is a piece of the CTA at its position (it writes zeros). Piece (b, c) has partial row b + c:
// along the tiles b and c never both stay, so the rows are distinct and below b + ctas.

struct Span {
  int first = 0, last = 0;  // the CTAs (chunks) that hold batch b's pieces
};

__device__ __forceinline__ Span span_of(int64_t at, int64_t tiles, int64_t quota, int64_t last) {
  Span sp;
  if (tiles > 0) {
    sp.first = static_cast<int>(at / quota);
    sp.last = static_cast<int>((at + tiles - 1) / quota);
  } else {
    sp.first = sp.last = static_cast<int>(at / quota < last ? at / quota : last);
  }
  return sp;
}

struct Chunk {
  int b_lo = -1, b_hi = -1;  // the batches this CTA holds pieces of (-1: none)
  int64_t at = 0;            // the first tile of batch b_lo along the batches' tiles
  int64_t quota = 1;
  int64_t last = 0;  // the last CTA with work
};

// CTA c's chunk. Block-wide (every thread calls it); scratch: 12 int64 of shared memory.
__device__ Chunk schedule_chunk(const Params& p, int c, long long* scratch) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  constexpr int kWarps = kThreads / 32;
  const int64_t ctas = p.slots - p.b;  // b * max_splits >= 1, the grid's CTAs a unit
  // Each thread takes a contiguous run of batches, so that the scan below is in batch order.
  const int per = (p.b + kThreads - 1) / kThreads;
  const int b0 = min(p.b, tid * per), b1 = min(p.b, b0 + per);
  long long mine = 0;
  for (int b = b0; b < b1; ++b) mine += batch_of(p, b).tiles;
  long long incl = mine;  // inclusive scan over the warp, then over the warps
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const long long x = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += x;
  }
  if (lane == 31) scratch[warp] = incl;
  if (tid == 0) {
    scratch[2 * kWarps] = -1;     // b_lo: none yet
    scratch[2 * kWarps + 1] = 0;  // b_hi (an atomic max)
  }
  __syncthreads();
  long long at = incl - mine, total = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) at += scratch[w];
    total += scratch[w];
  }
  Chunk ch;
  const int64_t even = (total + ctas - 1) / ctas;
  ch.quota = even > p.min_split_tiles ? even : p.min_split_tiles;
  ch.last = total > 0 ? (total - 1) / ch.quota : 0;
  // The span of the batch before this thread's first (whose last CTA tells whether b0 is c's
  // first batch).
  int prev_last = -1;
  if (b0 > 0 && b0 < b1) {
    const int64_t nt = batch_of(p, b0 - 1).tiles;
    prev_last = span_of(at - nt, nt, ch.quota, ch.last).last;
  }
  for (int b = b0; b < b1; ++b) {
    const int64_t nt = batch_of(p, b).tiles;
    const Span sp = span_of(at, nt, ch.quota, ch.last);
    if (sp.first <= c && c <= sp.last) {
      if (prev_last < c) {  // c's first batch: one thread writes it
        scratch[2 * kWarps] = b;
        scratch[2 * kWarps + 2] = at;
      }
      atomicMax(reinterpret_cast<unsigned long long*>(scratch + 2 * kWarps + 1),
                static_cast<unsigned long long>(b));
    }
    prev_last = sp.last;
    at += nt;
  }
  __syncthreads();
  ch.b_lo = static_cast<int>(scratch[2 * kWarps]);
  ch.b_hi = static_cast<int>(scratch[2 * kWarps + 1]);
  ch.at = scratch[2 * kWarps + 2];
  __syncthreads();  // scratch is free for the caller again
  return ch;
}

// Batch-invariant split s's keys [lo, hi) (empty when s holds none of the batch's keys).
__device__ __forceinline__ void split_range(const Params& p, const Batch& t, int s, int& lo,
                                            int& hi) {
  lo = static_cast<int>(max(static_cast<int64_t>(t.kb), s * p.split_tokens));
  hi = static_cast<int>(min(static_cast<int64_t>(t.ke), (s + 1) * p.split_tokens));
  if (s < t.first || s >= t.first + t.count) hi = lo;
}

// ---- sm80 plumbing: cp.async, ldmatrix, mma.sync m16n8k16 (PTX of sm_80; runs on sm_90). ----

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared; ok = false zero-fills and reads nothing.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(ok ? 16 : 0));
}
// 4 bytes global -> shared (a block table entry).
__device__ __forceinline__ void cp_async4(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(dst)), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

template <class T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4],
                                                        uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__half>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                 uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

template <class T>
__device__ __forceinline__ uint16_t from_float(float x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half_as_ushort(__float2half_rn(x));
  } else {
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
  }
}

// A tile of rows x kD elements in shared memory, 16-byte chunks XOR-swizzled by row: the 8 rows
// an ldmatrix reads at one logical chunk land in 8 different bank groups.
template <int kD>
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * kD + ((chunk ^ (row & 7)) << 3);
}

// Paged: a tile's block table entries (at most kBlockN / 16, pages being >= 16 keys) are read
// kAhead tiles before the tile's rows are copied, into a ring of kRing tiles' entries.
inline constexpr int kTableAhead = 4;
inline constexpr int kTableRing = 8;
inline constexpr int kTableEntries = kBlockN / 16;

template <int kD, int kStagesT = (kD <= 64 ? 4 : 3)>
struct Smem {
  static constexpr int kStages = kStagesT;
  static constexpr int kTile = kBlockN * kD;  // elements of one K or V stage
  static constexpr size_t kBytes = sizeof(uint16_t) * (kBlockM * kD + 2 * kStages * kTile) +
                                   4 * kBlockM * 2 * sizeof(float) +
                                   kTableRing * kTableEntries * sizeof(int32_t);
  // The entries of tile n are copied with the rows of tile n - kAhead (visible from iteration
  // n - kAhead on) and used when tile n's rows are issued (iteration n - kStages + 1); the ring
  // slot is written again for tile n + kRing only after that, in the prologue included.
  static_assert(kTableAhead >= kStages - 1 && kTableAhead + kStages - 2 < kTableRing);
};

// ---- The attention kernel. -----------------------------------------------------------------

// One piece of work: keys [lo, hi) of batch b for kv head h and row tile mt; partials (when
// not direct) go to partial row prow. Block-wide; leaves no copy in flight.
template <class T, int kD, bool kPaged, int kStagesT>
__device__ __forceinline__ void attend_piece(const Params& p, int mt, int h, int b, int lo, int hi,
                                             int64_t prow, const Batch& bt, bool direct) {
  using S = Smem<kD, kStagesT>;
  constexpr int kStages = S::kStages;
  constexpr int kChunks = kD / 8;                   // 16-byte chunks of a row
  constexpr int kRowsPerPass = kThreads / kChunks;  // rows a pass of the CTA loads
  constexpr int kKSteps = kD / 16;
  constexpr int kDTiles = kD / 8;

  extern __shared__ __align__(128) uint16_t smem[];
  uint16_t* sq = smem;
  uint16_t* sk = sq + kBlockM * kD;
  uint16_t* sv = sk + kStages * S::kTile;
  float* red = reinterpret_cast<float*>(sv + kStages * S::kTile);     // [2][4 warps][16 rows]
  int32_t* ring = reinterpret_cast<int32_t*>(red + 2 * 4 * kBlockM);  // [kRing][kEntries]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  if (!direct && lo >= hi) return;  // the merge skips this split

  // Q: the 16 packed rows, any strides (tiny next to K and V), zero past the valid rows.
  for (int e = tid; e < kBlockM * kChunks; e += kThreads) {
    const int r = e / kChunks, c = e % kChunks;
    const int pr = mt * kBlockM + r, i = pr / p.group, hq = h * p.group + pr % p.group;
    uint32_t w[4] = {0, 0, 0, 0};
    if (i < bt.sq) {
      const int64_t qd = p.q_d_stride;
      const uint16_t* q = static_cast<const uint16_t*>(p.q) + b * p.q_strides.b +
                          hq * p.q_strides.h + (bt.q0 + i) * p.q_strides.s + c * 8 * qd;
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        w[x] = static_cast<uint32_t>(q[2 * x * qd]) |
               (static_cast<uint32_t>(q[(2 * x + 1) * qd]) << 16);
      }
    }
    *reinterpret_cast<uint4*>(sq + swz<kD>(r, c)) = make_uint4(w[0], w[1], w[2], w[3]);
  }

  // Each thread's two accumulator rows (lane / 4 and + 8): the keys they may see in this split.
  int row_lo[2], row_hi[2];
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    const int pr = mt * kBlockM + lane / 4 + 8 * x, i = pr / p.group;
    row_lo[x] = 1;
    row_hi[x] = 0;
    if (i < bt.sq) {
      row_lo[x] = clamp_int(p.band.first_key(i, bt.off), lo, hi);
      row_hi[x] = clamp_int(p.band.last_key(i, bt.off), lo - 1, hi - 1);
    }
  }

  // K and V rows: dense/ragged rows are linear in the key; paged rows come from the table.
  const uint16_t* kbase = static_cast<const uint16_t*>(p.k);
  const uint16_t* vbase = static_cast<const uint16_t*>(p.v);
  if constexpr (kPaged) {
    kbase += h * p.k_strides.h;
    vbase += h * p.v_strides.h;
  } else {
    kbase += b * p.k_strides.b + h * p.k_strides.h + bt.kv0 * p.k_strides.s;
    vbase += b * p.v_strides.b + h * p.v_strides.h + bt.kv0 * p.v_strides.s;
  }
  const int ld_chunk = tid % kChunks, ld_row = tid / kChunks;
  constexpr int kPasses = kBlockN / kRowsPerPass;
  const int n_begin = (lo / kBlockN) * kBlockN;
  const int n_tiles = lo < hi ? (hi - n_begin + kBlockN - 1) / kBlockN : 0;
  // Paged: tile n's table entries (pages n0 >> shift, + 1, ...) into ring slot n % kRing, those
  // of pages that hold keys of [lo, hi) only (the table may end there).
  auto fetch_entries = [&](int n) {
    if constexpr (kPaged) {
      const int per_tile = max(1, kBlockN >> p.page_shift);
      if (tid < per_tile && n < n_tiles) {
        const int64_t page = ((n_begin + n * kBlockN) >> p.page_shift) + tid;
        const int64_t first = page << p.page_shift;
        if (first < hi && first + (int64_t{1} << p.page_shift) > lo) {
          cp_async4(ring + (n % kTableRing) * kTableEntries + tid,
                    p.pages.table + b * p.pages.table_stride_b + page * p.pages.table_stride_p);
        }
      }
    }
  };
  auto load_tile = [&](int n, int stage) {
    uint16_t* dk = sk + stage * S::kTile;
    uint16_t* dv = sv + stage * S::kTile;
    const int n0 = n_begin + n * kBlockN;
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const int row = ld_row + pass * kRowsPerPass, j = n0 + row;
      const bool ok = j >= lo && j < hi;
      const uint16_t* ks = kbase;
      const uint16_t* vs = vbase;
      if (ok) {
        if constexpr (kPaged) {
          const int64_t page =
              ring[(n % kTableRing) * kTableEntries + ((j >> p.page_shift) - (n0 >> p.page_shift))];
          const int64_t pg =
              page < 0 ? 0 : (page >= p.pages.num_pages ? p.pages.num_pages - 1 : page);
          const int64_t r = j & ((1 << p.page_shift) - 1);
          ks += pg * p.k_strides.b + r * p.k_strides.s + ld_chunk * 8;
          vs += pg * p.v_strides.b + r * p.v_strides.s + ld_chunk * 8;
        } else {
          ks += j * p.k_strides.s + ld_chunk * 8;
          vs += j * p.v_strides.s + ld_chunk * 8;
        }
      }
      cp_async16(dk + swz<kD>(row, ld_chunk), ks, ok);
      cp_async16(dv + swz<kD>(row, ld_chunk), vs, ok);
    }
  };

  float o[kDTiles][4];
#pragma unroll
  for (int d = 0; d < kDTiles; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

  if constexpr (kPaged) {  // the first kAhead tiles' entries: one table latency, paid once
#pragma unroll
    for (int n = 0; n < kTableAhead; ++n) fetch_entries(n);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
  }
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_tiles) load_tile(s, s);
    fetch_entries(s + kTableAhead);
    cp_async_commit();
  }
  __syncthreads();  // Q in shared memory
  uint32_t qf[kKSteps][4];
#pragma unroll
  for (int kk = 0; kk < kKSteps; ++kk) {
    ldmatrix_x4(qf[kk], sq + swz<kD>(lane % 16, 2 * kk + lane / 16));
  }

  for (int t = 0; t < n_tiles; ++t) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile t landed; every warp is done with the stage loaded next
    if (t + kStages - 1 < n_tiles) load_tile(t + kStages - 1, (t + kStages - 1) % kStages);
    fetch_entries(t + kStages - 1 + kTableAhead);
    cp_async_commit();

    const int stage = t % kStages;
    const int key0 = n_begin + t * kBlockN + 16 * warp;  // this warp's 16 keys
    if (key0 >= hi || key0 + 16 <= lo) continue;         // none of them in the split
    const uint16_t* tk = sk + stage * S::kTile;
    const uint16_t* tv = sv + stage * S::kTile;

    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      uint32_t kf[4];
      ldmatrix_x4(kf,
                  tk + swz<kD>(16 * warp + lane % 8 + 8 * (lane / 16), 2 * kk + (lane / 8) % 2));
      mma16816<T>(s[0], qf[kk], kf[0], kf[1]);
      mma16816<T>(s[1], qf[kk], kf[2], kf[3]);
    }

    // Scores in log2 units, masked; then the warp's online softmax over its rows.
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int x = e / 2, key = key0 + 8 * nt + 2 * (lane % 4) + e % 2;
        float v = s[nt][e];
        if (p.has_softcap) {
          v = p.softcap * tanhf(v * p.scale * p.inv_softcap) * kLog2e;
        } else {
          v *= p.scale_log2;
        }
        v = (key >= row_lo[x] && key <= row_hi[x]) ? v : -INFINITY;
        s[nt][e] = v;
        mx[x] = fmaxf(mx[x], v);
      }
    }
    float alpha[2], m_use[2];
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      const float m_new = fmaxf(m_run[x], kernels::quad_max(mx[x]));
      m_use[x] = m_new == -INFINITY ? 0.f : m_new;
      alpha[x] = kernels::fast_exp2(m_run[x] - m_use[x]);
      m_run[x] = m_new;
      l_run[x] *= alpha[x];
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float pe = kernels::fast_exp2(s[nt][e] - m_use[e / 2]);
        s[nt][e] = pe;
        l_run[e / 2] += pe;
      }
    }
    // Once the running max settles (most tiles of a long decode), alpha is exactly 1.
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
      for (int d = 0; d < kDTiles; ++d) {
        o[d][0] *= alpha[0];
        o[d][1] *= alpha[0];
        o[d][2] *= alpha[1];
        o[d][3] *= alpha[1];
      }
    }
    const uint32_t pa[4] = {pack2<T>(s[0][0], s[0][1]), pack2<T>(s[0][2], s[0][3]),
                            pack2<T>(s[1][0], s[1][1]), pack2<T>(s[1][2], s[1][3])};
#pragma unroll
    for (int dp = 0; dp < kDTiles / 2; ++dp) {
      uint32_t vf[4];
      ldmatrix_x4_trans(
          vf, tv + swz<kD>(16 * warp + lane % 8 + 8 * ((lane / 8) % 2), 2 * dp + lane / 16));
      mma16816<T>(o[2 * dp], pa, vf[0], vf[1]);
      mma16816<T>(o[2 * dp + 1], pa, vf[2], vf[3]);
    }
  }

  // Merge the four warps in warp order. The stages are free once every copy has landed.
  cp_async_wait<0>();
  float* red_m = red;
  float* red_l = red + 4 * kBlockM;
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    const float l = kernels::quad_sum(l_run[x]);
    if (lane % 4 == 0) {
      red_m[warp * kBlockM + lane / 4 + 8 * x] = m_run[x];
      red_l[warp * kBlockM + lane / 4 + 8 * x] = l;
    }
  }
  __syncthreads();
  float* ored = reinterpret_cast<float*>(sk);  // [4 warps][16 rows][kD] f32
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    const int r = lane / 4 + 8 * x;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < 4; ++w) M = fmaxf(M, red_m[w * kBlockM + r]);
    const float w_scale = kernels::fast_exp2(m_run[x] - (M == -INFINITY ? 0.f : M));
#pragma unroll
    for (int d = 0; d < kDTiles; ++d) {
      float2 v = make_float2(o[d][2 * x] * w_scale, o[d][2 * x + 1] * w_scale);
      *reinterpret_cast<float2*>(ored + (warp * kBlockM + r) * kD + 8 * d + 2 * (lane % 4)) = v;
    }
  }
  __syncthreads();

  // 8 threads a row, kD / 8 columns each: O = (sum of the warps) * factor.
  const int r = tid / 8, c0 = (tid % 8) * (kD / 8);
  const int pr = mt * kBlockM + r, i = pr / p.group, hq = h * p.group + pr % p.group;
  if (i >= bt.q_rows || (!direct && i >= bt.sq)) return;
  float M = -INFINITY;
#pragma unroll
  for (int w = 0; w < 4; ++w) M = fmaxf(M, red_m[w * kBlockM + r]);
  const float m_safe = M == -INFINITY ? 0.f : M;
  float L = 0.f;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    L += red_l[w * kBlockM + r] * kernels::fast_exp2(red_m[w * kBlockM + r] - m_safe);
  }
  // Fold in the sink (direct only; the merge does it for split batches). NaN must survive to
  // O and stats: the max is a compare that keeps a NaN sink, and a NaN score shows as L = NaN.
  const float sink2 = direct && p.has_sink ? p.sink[hq * p.sink_stride] * kLog2e : -INFINITY;
  const float M2 = M > sink2 ? M : sink2;
  float factor = 0.f, lse = -INFINITY;
  const bool valid = i < bt.sq;
  if (valid && (M2 != -INFINITY || L != L)) {
    const float keep = exp2f(M - M2);
    const float denom = fmaf(L, keep, sink2 == -INFINITY ? 0.f : exp2f(sink2 - M2));
    factor = keep / denom;
    lse = (M2 + log2f(denom)) * kLn2;
  }
  float acc[kD / 8];
#pragma unroll
  for (int c = 0; c < kD / 8; ++c) {
    const int col = c0 + c;
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < 4; ++w) v += ored[(w * kBlockM + r) * kD + col];
    acc[c] = valid ? v * factor : 0.f;  // a select: 0 * a NaN that V brought in is NaN
  }
  if (direct) {
    uint16_t* o_row = static_cast<uint16_t*>(p.o) + b * p.o_strides.b + hq * p.o_strides.h +
                      (bt.q0 + i) * p.o_strides.s;
#pragma unroll
    for (int c = 0; c < kD / 8; ++c) o_row[(c0 + c) * p.o_d_stride] = from_float<T>(acc[c]);
    if (p.has_stats && tid % 8 == 0) {
      p.stats[b * p.stats_strides.b + hq * p.stats_strides.h + (bt.q0 + i) * p.stats_strides.s] =
          lse;
    }
  } else {
    const int64_t row = (prow * p.h_q + hq) * p.s_q + i;
    float* po = p.partial_o + row * kD + c0;
#pragma unroll
    for (int c = 0; c < kD / 8; c += 4) {
      *reinterpret_cast<float4*>(po + c) = make_float4(acc[c], acc[c + 1], acc[c + 2], acc[c + 3]);
    }
    if (tid % 8 == 0) p.partial_lse[row] = lse;
  }
}

// ---- The merge: one warp a row (b, hq, i) of a batch that took `count` splits. -------------

// Merges the row's partials in split order (prow_of(s): split s's partial row) into O and
// stats, then folds in the sink; a row past the batch's valid queries gets O = 0, stats = -inf.
// The partials come from other CTAs: read through L2 (ld.global.cg), after the arrival fence.
template <class T, int kD, class RowOf>
__device__ __forceinline__ void merge_row(const Params& p, const Batch& bt, int b, int hq, int i,
                                          int count, RowOf prow_of) {
  constexpr int kPer = kD / 32;  // columns a lane
  const int lane = threadIdx.x & 31;
  float acc[kPer];
#pragma unroll
  for (int c = 0; c < kPer; ++c) acc[c] = 0.f;
  float lse = -INFINITY;
  if (i < bt.sq) {
    const auto row_of = [&](int s) { return (prow_of(s) * p.h_q + hq) * p.s_q + i; };
    // Pass 1, a split a lane: the largest lse (and whether one is NaN) over the warp.
    kernels::LseMerge<float> merge;
    for (int s = lane; s < count; s += 32) merge.see(__ldcg(p.partial_lse + row_of(s)));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      merge.max = fmaxf(merge.max, __shfl_xor_sync(0xffffffffu, merge.max, o));
    }
    merge.nan = __any_sync(0xffffffffu, merge.nan);
    // Pass 2, 32 splits at a time: each lane weighs one, then the warp adds them in split order
    // (every split in the range was written, so its O is read unconditionally: independent
    // loads, and a select keeps a part that contributes nothing out of the sums).
    float sum = 0.f;
    for (int c = 0; c < count; c += 32) {
      float w = 0.f;
      bool use = false;
      if (c + lane < count) {
        const float l = __ldcg(p.partial_lse + row_of(c + lane));
        use = merge.contributes(l);
        w = use ? merge.weight(l) : 0.f;
      }
      const unsigned used = __ballot_sync(0xffffffffu, use);
      const int n = min(32, count - c);
#pragma unroll 4
      for (int j = 0; j < n; ++j) {
        const float wj = __shfl_sync(0xffffffffu, w, j);
        const bool uj = (used >> j) & 1u;
        const float* po = p.partial_o + row_of(c + j) * kD + lane * kPer;
        sum = uj ? sum + wj : sum;
#pragma unroll
        for (int x = 0; x < kPer; ++x) acc[x] = uj ? fmaf(wj, __ldcg(po + x), acc[x]) : acc[x];
      }
    }
    float factor = merge.factor(sum);
    lse = merge.lse(sum);
    if (p.has_sink) {  // one more term exp(sink) in the denominator; NaN survives as above
      const float sink = p.sink[hq * p.sink_stride];
      const float M2 = lse > sink ? lse : sink;
      if (M2 != -INFINITY || lse != lse) {
        const float keep = expf(lse - M2);
        const float denom = keep + expf(sink - M2);
        factor *= keep / denom;
        lse = M2 + logf(denom);
      }
    }
#pragma unroll
    for (int c = 0; c < kPer; ++c) acc[c] *= factor;
  }
  uint16_t* o_row = static_cast<uint16_t*>(p.o) + b * p.o_strides.b + hq * p.o_strides.h +
                    (bt.q0 + i) * p.o_strides.s;
#pragma unroll
  for (int c = 0; c < kPer; ++c) {
    o_row[(lane * kPer + c) * p.o_d_stride] = from_float<T>(acc[c]);
  }
  if (p.has_stats && lane == 0) {
    p.stats[b * p.stats_strides.b + hq * p.stats_strides.h + (bt.q0 + i) * p.stats_strides.s] = lse;
  }
}

// After a split piece of unit (b, h, mt) wrote its partials: counts its arrival, and the piece
// that arrives last (count in all) merges the unit's rows, a warp a row. Block-wide. The fence
// before the count publishes this CTA's partials; the one after it orders the merge's reads
// after every other piece's count (CUDA's threadFenceReduction pattern).
template <class T, int kD, class RowOf>
__device__ __forceinline__ void arrive(const Params& p, int mt, int h, int b, const Batch& bt,
                                       int count, RowOf prow_of) {
  __threadfence();
  __syncthreads();
  const int tid = threadIdx.x, warp = tid >> 5;
  int* counter = p.arrivals + (static_cast<int64_t>(b) * p.h_kv + h) * p.m_tiles + mt;
  bool last = false;
  if (tid == 0) last = atomicAdd(counter, 1) == count - 1;
  if (!__syncthreads_or(last)) return;
  __threadfence();
  for (int r = warp; r < kBlockM; r += kThreads / 32) {
    const int pr = mt * kBlockM + r, i = pr / p.group, hq = h * p.group + pr % p.group;
    if (i < bt.q_rows) merge_row<T, kD>(p, bt, b, hq, i, count, prow_of);
  }
}

// kInvariant: the batch-invariant mode (split_tokens); else the dynamic schedule. One path a
// kernel: each keeps its own registers and code, the main loop inlined once.
// Two-stage d128 runs 3 CTAs an SM: at most 168 registers a thread (the merge alone asks more).
template <class T, int kD, bool kPaged, int kStagesT, bool kInvariant>
__global__ void __launch_bounds__(kThreads, kD == 128 && kStagesT == 2 ? 3 : 1)
    decode_kernel(const Params p) {
  int64_t bid = blockIdx.x;
  const int mt = static_cast<int>(bid % p.m_tiles);
  bid /= p.m_tiles;
  const int h = static_cast<int>(bid % p.h_kv);
  bid /= p.h_kv;
  if constexpr (kInvariant) {
    const int split = static_cast<int>(bid % p.max_splits);
    const int b = static_cast<int>(bid / p.max_splits);
    const Batch bt = batch_of(p, b);
    const bool direct = bt.count <= 1;
    if (direct && split != (bt.count == 1 ? bt.first : 0)) return;  // another CTA owns it
    int lo, hi;
    split_range(p, bt, split, lo, hi);
    attend_piece<T, kD, kPaged, kStagesT>(p, mt, h, b, lo, hi,
                                          static_cast<int64_t>(split) * p.b + b, bt, direct);
    if (direct || lo >= hi) return;  // no partials, or none of the batch's splits
    arrive<T, kD>(p, mt, h, b, bt, bt.count,
                  [&](int s) { return static_cast<int64_t>(bt.first + s) * p.b + b; });
  } else {
    using S = Smem<kD, kStagesT>;
    extern __shared__ __align__(128) uint16_t smem[];
    // The schedule's scratch: the merge area, free until a piece's end.
    long long* scratch =
        reinterpret_cast<long long*>(smem + kBlockM * kD + 2 * S::kStages * S::kTile);
    // This CTA's chunk of quota tiles along the batches, one piece a batch it overlaps.
    const int c = static_cast<int>(bid);
    const Chunk ch = schedule_chunk(p, c, scratch);
    if (ch.b_lo < 0) return;  // past the last chunk (the same for the whole block)
    int64_t at = ch.at;
    for (int b = ch.b_lo; b <= ch.b_hi; ++b) {
      if (b > ch.b_lo) __syncthreads();  // the previous piece's shared memory is read
      const Batch bt = batch_of(p, b);
      const Span sp = span_of(at, bt.tiles, ch.quota, ch.last);
      // This chunk's tiles of the batch, as keys.
      const int64_t c0 = c * ch.quota, c1 = c0 + ch.quota, end = at + bt.tiles;
      const int64_t t_lo = (c0 > at ? c0 : at) - at, t_hi = (c1 < end ? c1 : end) - at;
      const int t0 = bt.kb / kBlockN;
      const int lo = max(bt.kb, static_cast<int>(t0 + t_lo) * kBlockN);
      const int hi = min(bt.ke, static_cast<int>(t0 + t_hi) * kBlockN);
      const bool direct = sp.first == sp.last;
      attend_piece<T, kD, kPaged, kStagesT>(p, mt, h, b, lo, hi, static_cast<int64_t>(b) + c, bt,
                                            direct);
      if (!direct) {
        const int first = sp.first;
        arrive<T, kD>(p, mt, h, b, bt, sp.last - sp.first + 1,
                      [&](int s) { return static_cast<int64_t>(b) + first + s; });
      }
      at += bt.tiles;
    }
  }
}

// A ragged query side: rows of a slot past s_q (a slot wider than the envelope) are padding the
// kernels above do not reach: O = 0, stats = -inf (DESIGN 2.1). One block per batch.
template <class T>
__global__ void __launch_bounds__(kThreads) decode_ragged_pad_kernel(const Params p) {
  kernels::PadRows o{
      static_cast<uint16_t*>(p.o), p.o_strides.h, p.o_strides.s, p.o_d_stride, p.h_q, p.d_v};
  if (p.has_stats) {
    o.stats = p.stats;
    o.stats_head_stride = p.stats_strides.h;
    o.stats_row_stride = p.stats_strides.s;
  }
  for (int64_t b = blockIdx.x; b < p.b; b += gridDim.x) {
    kernels::pad_slot_rows(p.rq.slot(b), p.s_q, o);
  }
}

using Kernel = void (*)(const Params);

template <class T, int kD, int kStages = Smem<kD>::kStages>
Kernel attention_kernel(const Params& p) {
  if (p.split_tokens > 0) {
    return p.paged_kv ? decode_kernel<T, kD, true, kStages, true>
                      : decode_kernel<T, kD, false, kStages, true>;
  }
  return p.paged_kv ? decode_kernel<T, kD, true, kStages, false>
                    : decode_kernel<T, kD, false, kStages, false>;
}

Kernel pick_attention(const Params& p, bool bf16) {
  if (p.d_qk == 64) {
    return bf16 ? attention_kernel<__nv_bfloat16, 64>(p) : attention_kernel<__half, 64>(p);
  }
  if (p.stages == 2) {
    return bf16 ? attention_kernel<__nv_bfloat16, 128, 2>(p) : attention_kernel<__half, 128, 2>(p);
  }
  return bf16 ? attention_kernel<__nv_bfloat16, 128>(p) : attention_kernel<__half, 128>(p);
}

size_t smem_bytes(const Params& p) {
  return attention_smem_bytes(p.d_qk, p.stages);
}

Status cuda_error(const char* what, cudaError_t err) {
  return Status(Code::device_error, std::string(what) + ": " + cudaGetErrorString(err));
}

}  // namespace

size_t attention_smem_bytes(int d, int stages) {
  if (d == 64) return Smem<64>::kBytes;
  return stages == 2 ? Smem<128, 2>::kBytes : Smem<128>::kBytes;
}

Status load_kernels(const Params& p, bool bf16) {
  const Kernel k = pick_attention(p, bf16);
  cudaError_t err = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem_bytes(p)));
  if (err != cudaSuccess) return cuda_error("decode_kernel: cannot load", err);
  cudaFuncAttributes attr;
  if (p.ragged_q) {
    err = cudaFuncGetAttributes(
        &attr, bf16 ? decode_ragged_pad_kernel<__nv_bfloat16> : decode_ragged_pad_kernel<__half>);
    if (err != cudaSuccess) return cuda_error("decode_ragged_pad_kernel: cannot load", err);
  }
  return Status();
}

Status launch(const Params& p, bool bf16, Stream stream) {
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  // Dynamic: slots - b CTAs a unit; the last b take the extra slots too (decode_kernel).
  const int64_t per_unit = p.split_tokens > 0 ? static_cast<int64_t>(p.b) * p.max_splits
                                              : static_cast<int64_t>(p.slots) - p.b;
  const int64_t ctas = per_unit * p.h_kv * p.m_tiles;
  if (ctas == 0) return Status();
  if (p.arrivals != nullptr) {  // the counters start at zero whatever the workspace held
    const size_t bytes = static_cast<size_t>(p.b) * p.h_kv * p.m_tiles * sizeof(int32_t);
    const cudaError_t err = cudaMemsetAsync(p.arrivals, 0, bytes, s);
    if (err != cudaSuccess) return cuda_error("decode: zeroing the arrival counters failed", err);
  }
  pick_attention(p, bf16)<<<static_cast<unsigned>(ctas), kThreads, smem_bytes(p), s>>>(p);
  if (p.ragged_q) {
    const unsigned grid = static_cast<unsigned>(p.b < 65535 ? p.b : 65535);
    if (bf16) {
      decode_ragged_pad_kernel<__nv_bfloat16><<<grid, kThreads, 0, s>>>(p);
    } else {
      decode_ragged_pad_kernel<__half><<<grid, kThreads, 0, s>>>(p);
    }
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return cuda_error("decode_kernel: launch failed", err);
  return Status();
}

}  // namespace floe::detail::decode
