// decode engine: split-KV attention for short query sides (s_q <= 16), memory-bound.
//
// One CTA per (batch, kv head, split, 16 packed rows). The rows are the (query, head-in-group)
// pairs of one kv head, so a decode step of GQA 32/8 puts 4 heads into one MMA's M and reads
// each key once. Four warps each take 16 keys of every 64-key tile; K and V tiles stream
// through a cp.async pipeline of 16-byte row chunks (a paged row's address comes from the
// block table), into XOR-swizzled shared memory that ldmatrix reads without bank conflicts.
// Each warp keeps its own online softmax; the warps merge in a fixed order at the end.
//
// Splits: a batch's visible keys are cut into at most max_splits ranges by its device length
// (or, batch-invariant, at multiples of split_tokens). A batch that needs one split is written
// directly by that CTA; the others write fp32 partials (O normalised, lse) into the workspace
// and the combine kernel merges them in split order (kernels/lse_merge.h), then folds in the
// sink. Every order is fixed: results are bitwise deterministic.
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

// ---- Per-batch geometry, one definition for the attention and the combine kernels. ----------

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
  int tiles_per_split = 0;  // dynamic mode
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
    t.sq = p.seq_len_q ? clamp_int(__ldg(p.seq_len_q + b * p.seq_len_q_s), 0, p.s_q) : p.s_q;
    t.q_rows = p.s_q;
  }
  if (p.ragged_kv) {
    const kernels::Slot s = p.rkv.slot(b);
    t.kv0 = s.start;
    t.skv = static_cast<int>(s.len);
  } else {
    t.skv = p.seq_len_kv ? clamp_int(__ldg(p.seq_len_kv + b * p.seq_len_kv_s), 0, p.s_kv) : p.s_kv;
  }
  t.off = static_cast<int>(p.band.offset(t.sq, t.skv));
  if (t.sq > 0) {
    t.kb = clamp_int(p.band.first_key(0, t.off), 0, t.skv);
    t.ke = clamp_int(p.band.last_key(t.sq - 1, t.off) + 1, 0, t.skv);
  }
  if (t.ke <= t.kb) return t;  // no visible key: count 0
  if (p.split_tokens > 0) {
    const int64_t n = p.split_tokens;
    t.first = static_cast<int>(t.kb / n);
    t.count = static_cast<int>((t.ke + n - 1) / n) - t.first;
  } else {
    const int t0 = t.kb / kBlockN, t1 = (t.ke + kBlockN - 1) / kBlockN;
    const int nt = t1 - t0;
    t.tiles_per_split = max(p.min_split_tiles, (nt + p.max_splits - 1) / p.max_splits);
    t.count = (nt + t.tiles_per_split - 1) / t.tiles_per_split;
  }
  return t;
}

// Split s's keys [lo, hi) (empty when s holds none of the batch's keys).
__device__ __forceinline__ void split_range(const Params& p, const Batch& t, int s, int& lo,
                                            int& hi) {
  if (p.split_tokens > 0) {
    lo = static_cast<int>(max(static_cast<int64_t>(t.kb), s * p.split_tokens));
    hi = static_cast<int>(min(static_cast<int64_t>(t.ke), (s + 1) * p.split_tokens));
  } else {
    const int t0 = t.kb / kBlockN;
    lo = max(t.kb, (t0 + s * t.tiles_per_split) * kBlockN);
    hi = min(t.ke, (t0 + (s + 1) * t.tiles_per_split) * kBlockN);
  }
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

template <int kD, int kStagesT = (kD <= 64 ? 4 : 3)>
struct Smem {
  static constexpr int kStages = kStagesT;
  static constexpr int kTile = kBlockN * kD;  // elements of one K or V stage
  static constexpr size_t kBytes =
      sizeof(uint16_t) * (kBlockM * kD + 2 * kStages * kTile) + 4 * kBlockM * 2 * sizeof(float);
};

// ---- The attention kernel. -----------------------------------------------------------------

template <class T, int kD, bool kPaged, int kStagesT = Smem<kD>::kStages>
__global__ void __launch_bounds__(kThreads) decode_kernel(const Params p) {
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
  float* red = reinterpret_cast<float*>(sv + kStages * S::kTile);  // [2][4 warps][16 rows]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int64_t bid = blockIdx.x;
  const int mt = static_cast<int>(bid % p.m_tiles);
  bid /= p.m_tiles;
  const int h = static_cast<int>(bid % p.h_kv);
  bid /= p.h_kv;
  const int split = static_cast<int>(bid % p.max_splits);
  const int b = static_cast<int>(bid / p.max_splits);

  const Batch bt = batch_of(p, b);
  int lo, hi;
  split_range(p, bt, split, lo, hi);
  const bool direct = bt.count <= 1;
  if (direct) {
    if (split != (bt.count == 1 ? bt.first : 0)) return;  // another CTA owns the batch
  } else if (lo >= hi) {
    return;  // the combine skips this split
  }

  // Q: the 16 packed rows, any strides (tiny next to K and V), zero past the valid rows.
  for (int e = tid; e < kBlockM * kChunks; e += kThreads) {
    const int r = e / kChunks, c = e % kChunks;
    const int pr = mt * kBlockM + r, i = pr / p.group, hq = h * p.group + pr % p.group;
    uint32_t w[4] = {0, 0, 0, 0};
    if (i < bt.sq) {
      const uint16_t* q = static_cast<const uint16_t*>(p.q) + b * p.q_s[0] + hq * p.q_s[1] +
                          (bt.q0 + i) * p.q_s[2] + c * 8 * p.q_s[3];
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        w[x] = static_cast<uint32_t>(q[2 * x * p.q_s[3]]) |
               (static_cast<uint32_t>(q[(2 * x + 1) * p.q_s[3]]) << 16);
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
    kbase += h * p.k_s[2];
    vbase += h * p.v_s[2];
  } else {
    kbase += b * p.k_s[0] + h * p.k_s[1] + bt.kv0 * p.k_s[2];
    vbase += b * p.v_s[0] + h * p.v_s[1] + bt.kv0 * p.v_s[2];
  }
  const int ld_chunk = tid % kChunks, ld_row = tid / kChunks;
  // Paged: the page of each row this thread copies, read from the table one tile before its
  // copies are issued, so that the table read's latency hides under a tile's compute instead of
  // stalling the copies behind the barrier.
  constexpr int kPasses = kBlockN / kRowsPerPass;
  int32_t pages[kPaged ? kPasses : 1];
  auto fetch_pages = [&](int n0) {
    if constexpr (kPaged) {
#pragma unroll
      for (int pass = 0; pass < kPasses; ++pass) {
        const int j = n0 + ld_row + pass * kRowsPerPass;
        pages[pass] =
            j >= lo && j < hi
                ? p.pages.table[b * p.pages.table_stride_b +
                                static_cast<int64_t>(j >> p.page_shift) * p.pages.table_stride_p]
                : 0;
      }
    }
  };
  auto load_tile = [&](int n0, int stage) {
    uint16_t* dk = sk + stage * S::kTile;
    uint16_t* dv = sv + stage * S::kTile;
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const int row = ld_row + pass * kRowsPerPass, j = n0 + row;
      const bool ok = j >= lo && j < hi;
      const uint16_t* ks = kbase;
      const uint16_t* vs = vbase;
      if (ok) {
        if constexpr (kPaged) {
          const int64_t page = pages[pass];
          const int64_t pg =
              page < 0 ? 0 : (page >= p.pages.num_pages ? p.pages.num_pages - 1 : page);
          const int64_t r = j & ((1 << p.page_shift) - 1);
          ks += pg * p.k_s[0] + r * p.k_s[1] + ld_chunk * 8;
          vs += pg * p.v_s[0] + r * p.v_s[1] + ld_chunk * 8;
        } else {
          ks += j * p.k_s[2] + ld_chunk * 8;
          vs += j * p.v_s[2] + ld_chunk * 8;
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

  const int n_begin = (lo / kBlockN) * kBlockN;
  const int n_tiles = lo < hi ? (hi - n_begin + kBlockN - 1) / kBlockN : 0;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_tiles) {
      fetch_pages(n_begin + s * kBlockN);
      load_tile(n_begin + s * kBlockN, s);
    }
    cp_async_commit();
  }
  if (kStages - 1 < n_tiles) fetch_pages(n_begin + (kStages - 1) * kBlockN);
  __syncthreads();  // Q in shared memory
  uint32_t qf[kKSteps][4];
#pragma unroll
  for (int kk = 0; kk < kKSteps; ++kk) {
    ldmatrix_x4(qf[kk], sq + swz<kD>(lane % 16, 2 * kk + lane / 16));
  }

  for (int t = 0; t < n_tiles; ++t) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile t landed; every warp is done with the stage loaded next
    if (t + kStages - 1 < n_tiles) {
      load_tile(n_begin + (t + kStages - 1) * kBlockN, (t + kStages - 1) % kStages);
    }
    cp_async_commit();
    if (t + kStages < n_tiles) fetch_pages(n_begin + (t + kStages) * kBlockN);

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
  // Fold in the sink (direct only; the combine does it for split batches). NaN must survive to
  // O and stats: the max is a compare that keeps a NaN sink, and a NaN score shows as L = NaN.
  const float sink2 = direct && p.has_sink ? p.sink[hq * p.sink_s] * kLog2e : -INFINITY;
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
    uint16_t* o_row =
        static_cast<uint16_t*>(p.o) + b * p.o_s[0] + hq * p.o_s[1] + (bt.q0 + i) * p.o_s[2];
#pragma unroll
    for (int c = 0; c < kD / 8; ++c) o_row[(c0 + c) * p.o_s[3]] = from_float<T>(acc[c]);
    if (p.has_stats && tid % 8 == 0) {
      p.stats[b * p.stats_s[0] + hq * p.stats_s[1] + (bt.q0 + i) * p.stats_s[2]] = lse;
    }
  } else {
    const int64_t row = ((static_cast<int64_t>(split) * p.b + b) * p.h_q + hq) * p.s_q + i;
    float* po = p.partial_o + row * kD + c0;
#pragma unroll
    for (int c = 0; c < kD / 8; c += 4) {
      *reinterpret_cast<float4*>(po + c) = make_float4(acc[c], acc[c + 1], acc[c + 2], acc[c + 3]);
    }
    if (tid % 8 == 0) p.partial_lse[row] = lse;
  }
}

// ---- The combine: one warp a row (b, h_q, i < s_q) of a batch that took several splits. ------

template <class T, int kD>
__global__ void __launch_bounds__(kThreads) decode_combine_kernel(const Params p) {
  constexpr int kPer = kD / 32;  // columns a lane
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kCombineRows + threadIdx.x / 32;
  if (row >= static_cast<int64_t>(p.b) * p.h_q * p.s_q) return;
  const int i = static_cast<int>(row % p.s_q);
  const int hq = static_cast<int>(row / p.s_q % p.h_q);
  const int b = static_cast<int>(row / p.s_q / p.h_q);
  const Batch bt = batch_of(p, b);
  if (bt.count <= 1 || i >= bt.q_rows) return;  // written by the attention kernel, or not ours

  float acc[kPer];
#pragma unroll
  for (int c = 0; c < kPer; ++c) acc[c] = 0.f;
  float lse = -INFINITY;
  if (i < bt.sq) {
    const int64_t split_stride = static_cast<int64_t>(p.b) * p.h_q * p.s_q;
    const int64_t base = (static_cast<int64_t>(b) * p.h_q + hq) * p.s_q + i;
    const float* lse_of = p.partial_lse + base + bt.first * split_stride;
    const float* o_of = p.partial_o + (base + bt.first * split_stride) * kD + lane * kPer;
    // Pass 1, a split a lane: the largest lse (and whether one is NaN) over the warp.
    kernels::LseMerge<float> merge;
    for (int s = lane; s < bt.count; s += 32) merge.see(lse_of[s * split_stride]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      merge.max = fmaxf(merge.max, __shfl_xor_sync(0xffffffffu, merge.max, o));
    }
    merge.nan = __any_sync(0xffffffffu, merge.nan);
    // Pass 2, 32 splits at a time: each lane weighs one, then the warp adds them in split order
    // (every split in the range was written, so its O is read unconditionally: independent
    // loads, and a select keeps a part that contributes nothing out of the sums).
    float sum = 0.f;
    for (int c = 0; c < bt.count; c += 32) {
      float w = 0.f;
      bool use = false;
      if (c + lane < bt.count) {
        const float l = lse_of[(c + lane) * split_stride];
        use = merge.contributes(l);
        w = use ? merge.weight(l) : 0.f;
      }
      const unsigned used = __ballot_sync(0xffffffffu, use);
      const int n = min(32, bt.count - c);
#pragma unroll 4
      for (int j = 0; j < n; ++j) {
        const float wj = __shfl_sync(0xffffffffu, w, j);
        const bool uj = (used >> j) & 1u;
        const float* po = o_of + static_cast<int64_t>(c + j) * split_stride * kD;
        sum = uj ? sum + wj : sum;
#pragma unroll
        for (int x = 0; x < kPer; ++x) acc[x] = uj ? fmaf(wj, po[x], acc[x]) : acc[x];
      }
    }
    float factor = merge.factor(sum);
    lse = merge.lse(sum);
    if (p.has_sink) {  // one more term exp(sink) in the denominator; NaN survives as above
      const float sink = p.sink[hq * p.sink_s];
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
  uint16_t* o_row =
      static_cast<uint16_t*>(p.o) + b * p.o_s[0] + hq * p.o_s[1] + (bt.q0 + i) * p.o_s[2];
#pragma unroll
  for (int c = 0; c < kPer; ++c) o_row[(lane * kPer + c) * p.o_s[3]] = from_float<T>(acc[c]);
  if (p.has_stats && lane == 0) {
    p.stats[b * p.stats_s[0] + hq * p.stats_s[1] + (bt.q0 + i) * p.stats_s[2]] = lse;
  }
}

// A ragged query side: rows of a slot past s_q (a slot wider than the envelope) are padding the
// kernels above do not reach: O = 0, stats = -inf (DESIGN 2.1). One block per batch.
template <class T>
__global__ void __launch_bounds__(kThreads) decode_ragged_pad_kernel(const Params p) {
  kernels::PadRows o{static_cast<uint16_t*>(p.o), p.o_s[1], p.o_s[2], p.o_s[3], p.h_q, p.d_v};
  if (p.has_stats) {
    o.stats = p.stats;
    o.stats_head_stride = p.stats_s[1];
    o.stats_row_stride = p.stats_s[2];
  }
  for (int64_t b = blockIdx.x; b < p.b; b += gridDim.x) {
    kernels::pad_slot_rows(p.rq.slot(b), p.s_q, o);
  }
}

using Kernel = void (*)(const Params);

template <class T, int kD, int kStages = Smem<kD>::kStages>
Kernel attention_kernel(bool paged) {
  return paged ? decode_kernel<T, kD, true, kStages> : decode_kernel<T, kD, false, kStages>;
}

Kernel pick_attention(const Params& p, bool bf16) {
  if (p.d_qk == 64) {
    return bf16 ? attention_kernel<__nv_bfloat16, 64>(p.paged_kv)
                : attention_kernel<__half, 64>(p.paged_kv);
  }
  if (p.stages == 2) {
    return bf16 ? attention_kernel<__nv_bfloat16, 128, 2>(p.paged_kv)
                : attention_kernel<__half, 128, 2>(p.paged_kv);
  }
  return bf16 ? attention_kernel<__nv_bfloat16, 128>(p.paged_kv)
              : attention_kernel<__half, 128>(p.paged_kv);
}

Kernel pick_combine(const Params& p, bool bf16) {
  if (p.d_qk == 64) {
    return bf16 ? decode_combine_kernel<__nv_bfloat16, 64> : decode_combine_kernel<__half, 64>;
  }
  return bf16 ? decode_combine_kernel<__nv_bfloat16, 128> : decode_combine_kernel<__half, 128>;
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
  if (p.max_splits > 1) {
    err = cudaFuncGetAttributes(&attr, pick_combine(p, bf16));
    if (err != cudaSuccess) return cuda_error("decode_combine_kernel: cannot load", err);
  }
  if (p.ragged_q) {
    err = cudaFuncGetAttributes(
        &attr, bf16 ? decode_ragged_pad_kernel<__nv_bfloat16> : decode_ragged_pad_kernel<__half>);
    if (err != cudaSuccess) return cuda_error("decode_ragged_pad_kernel: cannot load", err);
  }
  return Status();
}

Status launch(const Params& p, bool bf16, Stream stream) {
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  const int64_t ctas = static_cast<int64_t>(p.b) * p.h_kv * p.max_splits * p.m_tiles;
  if (ctas == 0) return Status();
  pick_attention(p, bf16)<<<static_cast<unsigned>(ctas), kThreads, smem_bytes(p), s>>>(p);
  if (p.max_splits > 1) {
    const int64_t rows = static_cast<int64_t>(p.b) * p.h_q * p.s_q;
    const auto blocks = static_cast<unsigned>((rows + kCombineRows - 1) / kCombineRows);
    pick_combine(p, bf16)<<<blocks, kThreads, 0, s>>>(p);
  }
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
