// Dev harness for the sm90 backward (not built by CMake): random data, GPU fp32 reference
// forward (O, LSE) and backward (dQ, dK, dV), the three sm90 kernels, max error over every
// element, NaN poison in outputs and in padding rows of the inputs; then timing. Build (sm_90a):
//   nvcc -std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr -cudart static -I src -I include
//     -I <cutlass>/include tools/dev/sm90_bwd_harness.cu src/engines/sm90/tma_descriptor.cc
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <cuda_runtime.h>

#include "engines/sm90/bwd_dq_convert.cuh"
#include "engines/sm90/bwd_kernel.cuh"
#include "engines/sm90/bwd_preprocess.cuh"
#include "engines/sm90/tma_descriptor.h"
#include "kernels/constants.h"

using namespace floe::detail;
using namespace floe::detail::sm90;
using floe::kernels::BandMask;
namespace kernels = floe::kernels;

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

struct Dims {
  int b, hq, hkv, sq, skv, d;
};

struct Case {
  const char* name;
  int b, hq, hkv, sq, skv, d;
  bool mask;
  BandMask band;
  std::vector<int> lq, lkv;  // empty: full lengths
};

template <class E>
__global__ void ref_fwd(const E* q, const E* k, const E* v, float* o32, E* o, float* lse, Dims c,
                        float scale, BandMask band, bool has_mask, const int* lq, const int* lkv) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int total = c.b * c.hq * c.sq;
  if (idx >= total) return;
  int i = idx % c.sq, h = (idx / c.sq) % c.hq, b = idx / (c.sq * c.hq);
  int hk = h / (c.hq / c.hkv);
  int sq_b = lq ? lq[b] : c.sq, skv_b = lkv ? lkv[b] : c.skv;
  const E* qi = q + ((size_t)(b * c.hq + h) * c.sq + i) * c.d;
  float mx = -INFINITY;
  int64_t off = band.offset(sq_b, skv_b);
  auto vis = [&](int j) { return i < sq_b && j < skv_b && (!has_mask || band.visible(i, j, off)); };
  for (int j = 0; j < c.skv; ++j) {
    if (!vis(j)) continue;
    const E* kj = k + ((size_t)(b * c.hkv + hk) * c.skv + j) * c.d;
    float s = 0;
    for (int x = 0; x < c.d; ++x) s += (float)qi[x] * (float)kj[x];
    mx = fmaxf(mx, s * scale);
  }
  float sum = 0;
  float acc[256];
  for (int x = 0; x < c.d; ++x) acc[x] = 0;
  for (int j = 0; j < c.skv; ++j) {
    if (!vis(j)) continue;
    const E* kj = k + ((size_t)(b * c.hkv + hk) * c.skv + j) * c.d;
    const E* vj = v + ((size_t)(b * c.hkv + hk) * c.skv + j) * c.d;
    float s = 0;
    for (int x = 0; x < c.d; ++x) s += (float)qi[x] * (float)kj[x];
    float pe = expf(s * scale - mx);
    sum += pe;
    for (int x = 0; x < c.d; ++x) acc[x] += pe * (float)vj[x];
  }
  size_t ro = ((size_t)(b * c.hq + h) * c.sq + i) * c.d;
  for (int x = 0; x < c.d; ++x) {
    float val = sum > 0 ? acc[x] / sum : 0.f;
    o32[ro + x] = val;
    o[ro + x] = (E)val;
  }
  lse[idx] = sum > 0 ? mx + logf(sum) : -INFINITY;
}

// P and dS (natural scale, unscaled dS = P (dP - delta)) per (b, h, i, j).
template <class E>
__global__ void ref_pds(const E* q, const E* k, const E* v, const E* o, const E* dO,
                        const float* lse, float* P, float* dS, Dims c, float scale, BandMask band,
                        bool has_mask, const int* lq, const int* lkv) {
  size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t total = (size_t)c.b * c.hq * c.sq * c.skv;
  if (idx >= total) return;
  int j = idx % c.skv;
  int i = (idx / c.skv) % c.sq;
  int h = (idx / ((size_t)c.skv * c.sq)) % c.hq;
  int b = idx / ((size_t)c.skv * c.sq * c.hq);
  int hk = h / (c.hq / c.hkv);
  int sq_b = lq ? lq[b] : c.sq, skv_b = lkv ? lkv[b] : c.skv;
  int64_t off = band.offset(sq_b, skv_b);
  bool vis = i < sq_b && j < skv_b && (!has_mask || band.visible(i, j, off));
  size_t rq = ((size_t)(b * c.hq + h) * c.sq + i) * c.d;
  size_t rk = ((size_t)(b * c.hkv + hk) * c.skv + j) * c.d;
  float l = lse[(b * c.hq + h) * c.sq + i];
  if (!vis || l == -INFINITY) {
    P[idx] = 0;
    dS[idx] = 0;
    return;
  }
  float s = 0, dp = 0, delta = 0;
  for (int x = 0; x < c.d; ++x) {
    s += (float)q[rq + x] * (float)k[rk + x];
    dp += (float)dO[rq + x] * (float)v[rk + x];
    delta += (float)dO[rq + x] * (float)o[rq + x];
  }
  float p = expf(s * scale - l);
  P[idx] = p;
  dS[idx] = p * (dp - delta);
}

template <class E>
__global__ void ref_grads(const E* q, const E* k, const E* dO, const float* P, const float* dS,
                          float* dq, float* dk, float* dv, Dims c, float scale) {
  size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t nq = (size_t)c.b * c.hq * c.sq * c.d;
  size_t nk = (size_t)c.b * c.hkv * c.skv * c.d;
  int g = c.hq / c.hkv;
  if (idx < nq) {
    int x = idx % c.d;
    size_t row = idx / c.d;  // (b, h, i)
    int h = (row / c.sq) % c.hq, b = row / ((size_t)c.sq * c.hq);
    int hk = h / g;
    float s = 0;
    for (int j = 0; j < c.skv; ++j)
      s += dS[row * c.skv + j] * (float)k[((size_t)(b * c.hkv + hk) * c.skv + j) * c.d + x];
    dq[idx] = s * scale;
  } else if (idx < nq + nk) {
    size_t id2 = idx - nq;
    int x = id2 % c.d;
    size_t row = id2 / c.d;  // (b, hk, j)
    int j = row % c.skv, hk = (row / c.skv) % c.hkv, b = row / ((size_t)c.skv * c.hkv);
    float sk = 0, sv = 0;
    for (int h = hk * g; h < hk * g + g; ++h)
      for (int i = 0; i < c.sq; ++i) {
        size_t pr = ((size_t)(b * c.hq + h) * c.sq + i);
        sk += dS[pr * c.skv + j] * (float)q[pr * c.d + x];
        sv += P[pr * c.skv + j] * (float)dO[pr * c.d + x];
      }
    dk[id2] = sk * scale;
    dv[id2] = sv;
  }
}

__global__ void fill_value(float* x, size_t n, float v) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v;
}

template <class E>
struct Buf {
  E* p = nullptr;
  size_t n = 0;
  void alloc(size_t n_) {
    n = n_;
    CK(cudaMalloc(&p, n * sizeof(E)));
  }
};

// The variant under test (build with -DHV_OVERLAP=0/1 -DHV_DBUF=0/1 -DHV_STAGES=N -DHV_BM=64/80
// -DHV_DQFIRST=0/1 for d128; -DHV_BM64=64/128 -DHV_DBUF64=0/1 for d64). The library's tiles:
// -DHV_BM=80 -DHV_DQFIRST=1 -DHV_BM64=128.
#ifndef HV_OVERLAP
#define HV_OVERLAP 1
#endif
#ifndef HV_DBUF
#define HV_DBUF 0
#endif
#ifndef HV_DQFIRST
#define HV_DQFIRST 0
#endif
#ifndef HV_BM
#define HV_BM 64
#endif
#ifndef HV_STAGES
#define HV_STAGES 2
#endif
using T128 =
    BwdTraitsOf<cute::bfloat16_t, 128, HV_BM, 128, HV_STAGES, HV_OVERLAP, HV_DBUF, HV_DQFIRST>;
#ifndef HV_BM64
#define HV_BM64 64
#endif
#ifndef HV_DBUF64
#define HV_DBUF64 HV_DBUF
#endif
using T64 =
    BwdTraitsOf<cute::bfloat16_t, 64, HV_BM64, 128, HV_STAGES, HV_OVERLAP, HV_DBUF64, HV_DQFIRST>;

template <class T>
struct Runner {
  using E = typename T::Element;
  BwdParams p;
  unsigned grid_main = 0, grid_rows = 0;
  void setup(const Case& c, const E* q, const E* k, const E* v, const E* o, const E* dO,
             const float* lse, const int* lq, const int* lkv, E* dq, E* dk, E* dv, float* ws_acc,
             float* ws_lse, float* ws_delta, float scale) {
    auto tma = [&](const E* base, int h, int s, int rows, TmaDescriptor* out) {
      TmaTensor t;
      t.base = base;
      t.b = c.b;
      t.h = h;
      t.s = s;
      t.d = c.d;
      t.stride_s = c.d;
      t.stride_h = (int64_t)s * c.d;
      t.stride_b = (int64_t)h * s * c.d;
      t.box_rows = rows;
      t.bf16 = true;
      if (!encode_tma(t, out)) {
        printf("encode_tma failed: %s\n", tma_encoder_status().c_str());
        exit(1);
      }
    };
    tma(q, c.hq, c.sq, T::kBlockM, &p.tma_q);
    tma(dO, c.hq, c.sq, T::kBlockM, &p.tma_do);
    tma(k, c.hkv, c.skv, T::kBlockN, &p.tma_k);
    tma(v, c.hkv, c.skv, T::kBlockN, &p.tma_v);
    p.o = o;
    p.d_o = dO;
    p.stats = lse;
    p.lens.q = lq;
    p.lens.kv = lkv;
    p.lens.q_stride = 1;
    p.lens.kv_stride = 1;
    p.dq = dq;
    p.dk = dk;
    p.dv = dv;
    p.dq_accum = ws_acc;
    p.lse_log2 = ws_lse;
    p.delta = ws_delta;
    auto strides = [&](int h, int s, int d) {
      return kernels::Strides3{(int64_t)h * s * d, (int64_t)s * d, d};
    };
    p.o_strides = strides(c.hq, c.sq, c.d);
    p.do_strides = strides(c.hq, c.sq, c.d);
    p.dq_strides = strides(c.hq, c.sq, c.d);
    p.dk_strides = strides(c.hkv, c.skv, c.d);
    p.dv_strides = strides(c.hkv, c.skv, c.d);
    p.stats_strides = strides(c.hq, c.sq, 1);
    p.b = c.b;
    p.h_q = c.hq;
    p.h_kv = c.hkv;
    p.group = c.hq / c.hkv;
    p.s_q = c.sq;
    p.s_kv = c.skv;
    p.d = c.d;
    p.d_v = c.d;
    p.scale = scale;
    p.score.scale_log2 = scale * kernels::kLog2e;
    p.score.mask = c.band;
    p.score.has_mask = c.mask;
    p.num_m_blocks = (c.sq + T::kBlockM - 1) / T::kBlockM;
    p.num_n_blocks = (c.skv + T::kBlockN - 1) / T::kBlockN;
    p.s_q_pad = p.num_m_blocks * T::kBlockM;
    p.query_tiles = kernels::QueryTileScheduler::make(p.num_m_blocks, c.hq, false);
    p.key_tiles = kernels::KeyTileScheduler::make(p.num_n_blocks, c.hkv);
    grid_rows = p.num_m_blocks * c.hq * c.b;
    grid_main = p.num_n_blocks * c.hkv * c.b;
    CK(cudaFuncSetAttribute(bwd_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            T::kSmemBytes));
  }
  void launch() {
    bwd_preprocess_kernel<E, T::kBlockM><<<grid_rows, 256>>>(p);
    bwd_kernel<T><<<grid_main, T::kThreads, T::kSmemBytes>>>(p);
    bwd_dq_convert_kernel<T><<<grid_rows, T::kConsumerThreads>>>(p);
  }
};

static void fill(std::vector<__nv_bfloat16>& h, std::mt19937& g) {
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& x : h) x = __float2bfloat16(nd(g));
}

// Timing inputs: uniform in [-1.5, 1.5) from a hash (the normal draws take seconds a tensor at
// 16k tokens).
static void fill_fast(std::vector<__nv_bfloat16>& h, uint32_t seed) {
  for (size_t i = 0; i < h.size(); ++i) {
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    h[i] = __float2bfloat16(static_cast<float>(x & 0xffff) * (3.f / 65536.f) - 1.5f);
  }
}

template <class T>
static bool run_case(const Case& c, std::mt19937& gen, bool time_it) {
  using E = typename T::Element;
  const float scale = 1.f / sqrtf((float)c.d);
  size_t nq = (size_t)c.b * c.hq * c.sq * c.d, nk = (size_t)c.b * c.hkv * c.skv * c.d;
  std::vector<__nv_bfloat16> hq(nq), hk(nk), hv(nk), hdo(nq);
  if (time_it) {
    fill_fast(hq, 1);
    fill_fast(hk, 2);
    fill_fast(hv, 3);
    fill_fast(hdo, 4);
  } else {
    fill(hq, gen);
    fill(hk, gen);
    fill(hv, gen);
    fill(hdo, gen);
  }
  // Padding rows (past a batch's device length) hold NaN: the kernel must not read them into
  // any product that reaches a visible output.
  const __nv_bfloat16 nan = __float2bfloat16(NAN);
  for (int b = 0; b < c.b; ++b) {
    int lq = c.lq.empty() ? c.sq : c.lq[b], lk = c.lkv.empty() ? c.skv : c.lkv[b];
    for (int h = 0; h < c.hq; ++h)
      for (int i = lq; i < c.sq; ++i)
        for (int x = 0; x < c.d; ++x) {
          hq[((size_t)(b * c.hq + h) * c.sq + i) * c.d + x] = nan;
          hdo[((size_t)(b * c.hq + h) * c.sq + i) * c.d + x] = nan;
        }
    for (int h = 0; h < c.hkv; ++h)
      for (int j = lk; j < c.skv; ++j)
        for (int x = 0; x < c.d; ++x) {
          hk[((size_t)(b * c.hkv + h) * c.skv + j) * c.d + x] = nan;
          hv[((size_t)(b * c.hkv + h) * c.skv + j) * c.d + x] = nan;
        }
  }
  Buf<E> q, k, v, o, dO, dq, dk, dv;
  Buf<float> o32, lse, P, dS, rdq, rdk, rdv, acc, wl, wd;
  Buf<int> lq, lkv;
  q.alloc(nq);
  dO.alloc(nq);
  o.alloc(nq);
  dq.alloc(nq);
  k.alloc(nk);
  v.alloc(nk);
  dk.alloc(nk);
  dv.alloc(nk);
  o32.alloc(nq);
  lse.alloc((size_t)c.b * c.hq * c.sq);
  rdq.alloc(nq);
  rdk.alloc(nk);
  rdv.alloc(nk);
  CK(cudaMemcpy(q.p, hq.data(), nq * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dO.p, hdo.data(), nq * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(k.p, hk.data(), nk * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(v.p, hv.data(), nk * 2, cudaMemcpyHostToDevice));
  int *plq = nullptr, *plkv = nullptr;
  if (!c.lq.empty()) {
    lq.alloc(c.b);
    CK(cudaMemcpy(lq.p, c.lq.data(), c.b * 4, cudaMemcpyHostToDevice));
    plq = lq.p;
  }
  if (!c.lkv.empty()) {
    lkv.alloc(c.b);
    CK(cudaMemcpy(lkv.p, c.lkv.data(), c.b * 4, cudaMemcpyHostToDevice));
    plkv = lkv.p;
  }
  const Dims dims{c.b, c.hq, c.hkv, c.sq, c.skv, c.d};
  size_t nrow = (size_t)c.b * c.hq * c.sq;
  if (!time_it) {
    ref_fwd<E><<<(nrow + 127) / 128, 128>>>((E*)q.p, (E*)k.p, (E*)v.p, o32.p, (E*)o.p, lse.p, dims,
                                            scale, c.band, c.mask, plq, plkv);
  } else {  // timing: any finite O and LSE (the naive forward would take minutes at 16k)
    CK(cudaMemset(o.p, 0, nq * 2));
    fill_value<<<(nrow + 255) / 256, 256>>>(lse.p, nrow, 8.f);
  }
  CK(cudaGetLastError());
  const bool check = !time_it;
  if (check) {
    size_t np = (size_t)c.b * c.hq * c.sq * c.skv;
    P.alloc(np);
    dS.alloc(np);
    ref_pds<E><<<(np + 255) / 256, 256>>>((E*)q.p, (E*)k.p, (E*)v.p, (E*)o.p, (E*)dO.p, lse.p, P.p,
                                          dS.p, dims, scale, c.band, c.mask, plq, plkv);
    CK(cudaGetLastError());
    ref_grads<E><<<(nq + nk + 255) / 256, 256>>>((E*)q.p, (E*)k.p, (E*)dO.p, P.p, dS.p, rdq.p,
                                                 rdk.p, rdv.p, dims, scale);
    CK(cudaGetLastError());
  }
  Runner<T> r;
  int mb = (c.sq + T::kBlockM - 1) / T::kBlockM;
  size_t pad_rows = (size_t)c.b * c.hq * mb * T::kBlockM;
  acc.alloc(pad_rows * c.d);
  wl.alloc(pad_rows);
  wd.alloc(pad_rows);
  r.setup(c, (E*)q.p, (E*)k.p, (E*)v.p, (E*)o.p, (E*)dO.p, lse.p, plq, plkv, (E*)dq.p, (E*)dk.p,
          (E*)dv.p, acc.p, wl.p, wd.p, scale);
  CK(cudaMemset(dq.p, 0xff, nq * 2));  // NaN poison
  CK(cudaMemset(dk.p, 0xff, nk * 2));
  CK(cudaMemset(dv.p, 0xff, nk * 2));
  CK(cudaMemset(acc.p, 0xff, pad_rows * c.d * 4));
  r.launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  bool ok = true;
  if (check) {
    auto cmp = [&](const char* nm, E* got, float* ref, size_t n) {
      std::vector<__nv_bfloat16> hg(n);
      std::vector<float> hr(n);
      CK(cudaMemcpy(hg.data(), got, n * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hr.data(), ref, n * 4, cudaMemcpyDeviceToHost));
      double maxerr = 0, maxref = 0;
      size_t nan_count = 0, worst = 0;
      for (size_t i = 0; i < n; ++i) {
        float g = __bfloat162float(hg[i]);
        if (!std::isfinite(g)) {
          ++nan_count;
          continue;
        }
        double e = fabs((double)g - hr[i]);
        if (e > maxerr) maxerr = e, worst = i;
        maxref = fmax(maxref, fabs((double)hr[i]));
      }
      // bf16 output rounding (2^-8 relative) plus bf16 P and dS in the products.
      bool pass = nan_count == 0 && maxerr <= 2e-2 * maxref + 1e-3;
      printf("  %-3s max|err| %.3e  max|ref| %.3e  rel %.2e  nonfinite %zu  worst@%zu %s\n", nm,
             maxerr, maxref, maxerr / (maxref + 1e-30), nan_count, worst, pass ? "ok" : "FAIL");
      return pass;
    };
    printf("%s: b%d hq%d hkv%d sq%d skv%d d%d\n", c.name, c.b, c.hq, c.hkv, c.sq, c.skv, c.d);
    ok &= cmp("dQ", (E*)dq.p, rdq.p, nq);
    ok &= cmp("dK", (E*)dk.p, rdk.p, nk);
    ok &= cmp("dV", (E*)dv.p, rdv.p, nk);
  } else {
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int i = 0; i < 3; ++i) r.launch();
    cudaEventRecord(e0);
    const int iters = 20;
    for (int i = 0; i < iters; ++i) r.launch();
    cudaEventRecord(e1);
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    ms /= iters;
    double flops = 2.5 * 4.0 * c.b * c.hq * (double)c.sq * c.skv * c.d;
    if (c.mask) flops /= 2;
    printf("TIME bm%d ov%d db%d st%d dq%d %s: b%d hq%d hkv%d s%d d%d%s: %.3f ms  %.1f TFLOP/s\n",
           T::kBlockM, HV_OVERLAP, int(T::kDoubleBufferDs), HV_STAGES, HV_DQFIRST, c.name, c.b,
           c.hq, c.hkv, c.sq, c.d, c.mask ? " causal" : "", ms, flops / ms / 1e9);
  }
  for (void* x : {(void*)q.p,   (void*)k.p,  (void*)v.p,   (void*)o.p,   (void*)dO.p,
                  (void*)dq.p,  (void*)dk.p, (void*)dv.p,  (void*)o32.p, (void*)lse.p,
                  (void*)P.p,   (void*)dS.p, (void*)rdq.p, (void*)rdk.p, (void*)rdv.p,
                  (void*)acc.p, (void*)wl.p, (void*)wd.p,  (void*)lq.p,  (void*)lkv.p})
    if (x) cudaFree(x);
  return ok;
}

int main(int argc, char** argv) {
  std::mt19937 gen(argc > 1 ? atoi(argv[1]) : 1234);
  BandMask causal;
  causal.has_right = true;
  BandMask causal_br = causal;
  causal_br.bottom_right = true;
  BandMask window;
  window.has_left = true;
  window.left = 100;
  window.has_right = true;
  window.right = 20;
  int fails = 0;
  std::vector<Case> cases = {
      {"plain", 2, 4, 2, 512, 512, 128, false, {}, {}, {}},
      {"odd-lengths", 1, 2, 2, 301, 437, 128, false, {}, {}, {}},
      {"causal", 2, 4, 4, 421, 421, 128, true, causal, {}, {}},
      {"causal-br-gqa4-pad", 2, 4, 1, 200, 500, 128, true, causal_br, {200, 150}, {500, 333}},
      {"window-pad", 2, 2, 1, 384, 384, 128, true, window, {384, 257}, {300, 384}},
      {"pad-nomask", 2, 4, 2, 256, 256, 128, false, {}, {190, 256}, {256, 70}},
  };
  for (auto& c : cases) fails += !run_case<T128>(c, gen, false);
  std::vector<Case> cases64 = {
      {"d64-plain", 2, 4, 2, 512, 512, 64, false, {}, {}, {}},
      {"d64-causal-br-pad", 2, 4, 1, 200, 500, 64, true, causal_br, {200, 150}, {500, 333}},
      {"d64-window-pad", 2, 2, 1, 384, 384, 64, true, window, {384, 257}, {300, 384}},
      {"d64-odd-lengths", 1, 2, 2, 301, 437, 64, false, {}, {}, {}},
      {"d64-causal", 2, 4, 4, 421, 421, 64, true, causal, {}, {}},
      {"d64-pad-nomask", 2, 4, 2, 256, 256, 64, false, {}, {190, 256}, {256, 70}},
  };
  for (auto& c : cases64) fails += !run_case<T64>(c, gen, false);
  printf("CHECKS (overlap %d, dbuf %d, stages %d): %d failed\n", HV_OVERLAP, HV_DBUF, HV_STAGES,
         fails);
  if (fails == 0) {
    // 16k tokens, hidden 2048 (floe bench's sweep).
    for (int s : {1024, 4096, 16384}) {
      const int b = 16384 / s;
      for (bool m : {false, true}) {
        run_case<T128>({"d128", b, 16, 16, s, s, 128, m, causal, {}, {}}, gen, true);
        run_case<T64>({"d64", b, 32, 32, s, s, 64, m, causal, {}, {}}, gen, true);
      }
    }
  }
  return fails != 0;
}
