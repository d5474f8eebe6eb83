// The fast engines at the edges of 32-bit indexing (issue 11 item 9): a forward whose q, k, v
// and o have 2^32 elements each (B 1, Hq 16, S 2^21, D 128; a 256-key sliding window keeps the
// work to milliseconds), and a causal backward with B 1, Hq 128, S 131072, D 128 (2^31 elements
// a tensor, dQ's fp32 accumulator 8 GiB). Inputs are hashes of the element index, written on the
// device; sampled rows (first, last and some in between, of the first and last head) are held
// to fp64 values computed here for those rows only. Every fast engine (all but reference and
// generic; FLOE_ENGINE pins one) runs both; an engine that declines is passed over.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype_convert.h"
#include "support/gpu_hash_fill.h"
#include "support/harness_env.h"
#include "support/harness_gpu_test.h"

namespace floe::test {
namespace {

class IndexEdges : public GpuTest {};

constexpr int64_t kD = 128;
constexpr uint64_t kSeedQ = 1, kSeedK = 2, kSeedV = 3, kSeedDo = 4;

std::vector<std::string> fast_engines() {
  const std::string& pinned = harness_settings().engine;
  if (pinned != "auto") return {pinned};
  std::vector<std::string> out;
  for (const std::string& e : engine_names()) {
    if (e != "reference" && e != "generic") out.push_back(e);
  }
  return out;
}

struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes, unsigned char poison = 0xFF) {
    if (bytes == 0) return;
    if (cudaMalloc(&ptr, bytes) != cudaSuccess) {
      ptr = nullptr;
      return;
    }
    cudaMemset(ptr, poison, bytes);  // 0xFF: NaN in f16, bf16 and f32
  }
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Rows [row0, row0 + rows) of D elements of a packed [B=1, H, S, D] tensor, as floats.
std::vector<float> read_rows(const void* base, DType dtype, int64_t row0, int64_t rows) {
  std::vector<uint16_t> raw(static_cast<size_t>(rows * kD));
  const auto* src = static_cast<const char*>(base) + row0 * kD * 2;
  EXPECT_EQ(cudaMemcpy(raw.data(), src, raw.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<float> out(raw.size());
  for (size_t e = 0; e < raw.size(); ++e) out[e] = detail::load_as_float(raw.data(), e, dtype);
  return out;
}
std::vector<float> read_floats(const void* base, int64_t first, int64_t count) {
  std::vector<float> out(static_cast<size_t>(count));
  EXPECT_EQ(cudaMemcpy(out.data(), static_cast<const float*>(base) + first, count * 4,
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  return out;
}

// Row i of head h of a hashed [1, H, S, D] input.
std::vector<double> hashed_row(uint64_t seed, int64_t s, int64_t h, int64_t i) {
  std::vector<double> r(kD);
  const uint64_t base = static_cast<uint64_t>((h * s + i) * kD);
  for (int64_t d = 0; d < kD; ++d) r[d] = hash_value(base + d, seed);
  return r;
}

double dot(const double* a, const double* b) {
  double s = 0;
  for (int64_t d = 0; d < kD; ++d) s += a[d] * b[d];
  return s;
}

std::vector<int64_t> sampled_rows(int64_t s) {
  std::vector<int64_t> rows = {0, 1, 255, 256, s / 3, s / 2 - 1, s / 2, s - 2, s - 1};
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

// Holds `got` to `want` row by row: within `rel` of the row's largest |want| (bf16 outputs, P and
// dS rounded to bf16 for the products: well under 1%), plus `floor` of the largest |want| of all
// the tensor's samples, for rows that are 0 (dQ of row 0 under a causal mask is exactly 0: its
// dP - Delta cancels exactly on these inputs). An index error reads another row and misses by
// about the row's own size, which is why the floor is tiny: the last key's dV is P dO with
// P = 1/131072.
struct Samples {
  std::string name;
  std::vector<std::string> where;
  std::vector<std::vector<double>> got, want;

  void add(std::string w, std::vector<double> g, std::vector<double> x) {
    where.push_back(std::move(w));
    got.push_back(std::move(g));
    want.push_back(std::move(x));
  }
  static double max_abs(const std::vector<double>& v) {
    double m = 0;
    for (double x : v) m = std::max(m, std::fabs(x));
    return m;
  }
  void check(double rel, double floor) const {
    double scale = 0;
    for (const auto& w : want) scale = std::max(scale, max_abs(w));
    ASSERT_GT(scale, 0) << name << ": every sampled value is 0; the check could not fail";
    int bad = 0;
    for (size_t r = 0; r < got.size(); ++r) {
      const double tol = rel * max_abs(want[r]) + floor * scale;
      for (size_t e = 0; e < got[r].size(); ++e) {
        const double err = std::fabs(got[r][e] - want[r][e]);
        if (!(err <= tol) && bad++ < 8) {
          ADD_FAILURE() << name << " " << where[r] << " [" << e << "]: " << got[r][e] << ", fp64 "
                        << want[r][e] << " (tolerance " << tol << ")";
        }
      }
    }
    EXPECT_EQ(bad, 0) << name << ": " << bad << " elements out of tolerance";
  }
};

// O and stats of row i of head h over keys [lo, i], from hashed q, k, v, in fp64.
void forward_row(int64_t s, int64_t h, int64_t i, int64_t lo, double scale, std::vector<double>* o,
                 double* lse) {
  const std::vector<double> q = hashed_row(kSeedQ, s, h, i);
  std::vector<double> logits(static_cast<size_t>(i - lo + 1));
  double m = -INFINITY;
  for (int64_t j = lo; j <= i; ++j) {
    const std::vector<double> k = hashed_row(kSeedK, s, h, j);
    logits[j - lo] = scale * dot(q.data(), k.data());
    m = std::max(m, logits[j - lo]);
  }
  double l = 0;
  for (double x : logits) l += std::exp(x - m);
  *lse = m + std::log(l);
  o->assign(kD, 0.0);
  for (int64_t j = lo; j <= i; ++j) {
    const double p = std::exp(logits[j - lo] - *lse);
    const std::vector<double> v = hashed_row(kSeedV, s, h, j);
    for (int64_t d = 0; d < kD; ++d) (*o)[d] += p * v[d];
  }
}

struct Device {
  Result<Target> target = Target::cuda();
};

TEST_F(IndexEdges, ForwardTensorsOf2To32Elements) {
  constexpr int64_t kS = int64_t{1} << 21, kH = 16, kLeft = 255;
  const Problem problem = Problem::forward(Shape{1, kH, kH, kS, kS, kD, kD}, DType::bf16)
                              .set_window(kLeft, 0)
                              .set_stats();
  ASSERT_GT(problem.tensor(TensorId::q)->numel(), int64_t{1} << 31);
  Device dev;
  FLOE_ASSERT_OK(dev.target);
  int ran = 0;
  for (const std::string& engine : fast_engines()) {
    SCOPED_TRACE(engine);
    Result<Plan> plan = Plan::build(problem, *dev.target, PlanOptions{engine});
    if (!plan.ok() && plan.status().code() == Code::not_supported) continue;
    FLOE_ASSERT_OK(plan);
    const int64_t n = problem.tensor(TensorId::q)->numel();
    DeviceBuffer q(n * 2), k(n * 2), v(n * 2), o(n * 2), stats(kH * kS * 4),
        ws(plan->workspace_bytes());
    ASSERT_TRUE(q.ptr && k.ptr && v.ptr && o.ptr && stats.ptr) << "cudaMalloc of 4 x 8 GiB";
    FLOE_ASSERT_OK(fill_hashed(q.ptr, DType::bf16, n, kSeedQ, nullptr));
    FLOE_ASSERT_OK(fill_hashed(k.ptr, DType::bf16, n, kSeedK, nullptr));
    FLOE_ASSERT_OK(fill_hashed(v.ptr, DType::bf16, n, kSeedV, nullptr));
    Arguments args;
    args.set(TensorId::q, q.ptr).set(TensorId::k, k.ptr).set(TensorId::v, v.ptr);
    args.set(TensorId::o, o.ptr).set(TensorId::stats, stats.ptr);
    FLOE_ASSERT_OK(plan->execute(args, ws.ptr, plan->workspace_bytes()));
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ++ran;

    Samples so{"o"}, sl{"stats"};
    const double scale = 1.0 / std::sqrt(static_cast<double>(kD));
    for (int64_t h : {int64_t{0}, kH - 1}) {
      for (int64_t i : sampled_rows(kS)) {
        std::vector<double> want;
        double lse = 0;
        forward_row(kS, h, i, std::max<int64_t>(0, i - kLeft), scale, &want, &lse);
        const std::vector<float> got = read_rows(o.ptr, DType::bf16, h * kS + i, 1);
        const std::string where = "h" + std::to_string(h) + " i" + std::to_string(i);
        so.add(where, std::vector<double>(got.begin(), got.end()), want);
        sl.add(where, {read_floats(stats.ptr, h * kS + i, 1)[0]}, {lse});
      }
    }
    so.check(0.03, 1e-6);
    sl.check(1e-4, 0);
  }
  if (ran == 0) GTEST_SKIP() << "no fast engine served the problem";
}

TEST_F(IndexEdges, BackwardTensorsOf2To31Elements) {
  constexpr int64_t kS = 131072, kH = 128;
  const Shape shape{1, kH, kH, kS, kS, kD, kD};
  const Problem fwd = Problem::forward(shape, DType::bf16).set_causal().set_stats();
  const Problem bwd = Problem::backward(shape, DType::bf16).set_causal();
  ASSERT_EQ(bwd.tensor(TensorId::dq)->numel(), int64_t{1} << 31);
  Device dev;
  FLOE_ASSERT_OK(dev.target);
  int ran = 0;
  for (const std::string& engine : fast_engines()) {
    SCOPED_TRACE(engine);
    Result<Plan> fplan = Plan::build(fwd, *dev.target, PlanOptions{engine});
    Result<Plan> bplan = Plan::build(bwd, *dev.target, PlanOptions{engine});
    if ((!fplan.ok() && fplan.status().code() == Code::not_supported) ||
        (!bplan.ok() && bplan.status().code() == Code::not_supported)) {
      continue;
    }
    FLOE_ASSERT_OK(fplan);
    FLOE_ASSERT_OK(bplan);
    const int64_t n = bwd.tensor(TensorId::q)->numel();
    const size_t bytes = static_cast<size_t>(n) * 2;
    DeviceBuffer q(bytes), k(bytes), v(bytes), o(bytes), d_o(bytes), dq(bytes), dk(bytes),
        dv(bytes), stats(kH * kS * 4),
        ws(std::max(fplan->workspace_bytes(), bplan->workspace_bytes()));
    ASSERT_TRUE(q.ptr && k.ptr && v.ptr && o.ptr && d_o.ptr && dq.ptr && dk.ptr && dv.ptr &&
                stats.ptr)
        << "cudaMalloc of 8 x 4 GiB";
    FLOE_ASSERT_OK(fill_hashed(q.ptr, DType::bf16, n, kSeedQ, nullptr));
    FLOE_ASSERT_OK(fill_hashed(k.ptr, DType::bf16, n, kSeedK, nullptr));
    FLOE_ASSERT_OK(fill_hashed(v.ptr, DType::bf16, n, kSeedV, nullptr));
    FLOE_ASSERT_OK(fill_hashed(d_o.ptr, DType::bf16, n, kSeedDo, nullptr));
    Arguments fa;
    fa.set(TensorId::q, q.ptr).set(TensorId::k, k.ptr).set(TensorId::v, v.ptr);
    fa.set(TensorId::o, o.ptr).set(TensorId::stats, stats.ptr);
    FLOE_ASSERT_OK(fplan->execute(fa, ws.ptr, fplan->workspace_bytes()));
    Arguments ba;
    ba.set(TensorId::q, q.ptr).set(TensorId::k, k.ptr).set(TensorId::v, v.ptr);
    ba.set(TensorId::o, o.ptr).set(TensorId::stats, stats.ptr).set(TensorId::d_o, d_o.ptr);
    ba.set(TensorId::dq, dq.ptr).set(TensorId::dk, dk.ptr).set(TensorId::dv, dv.ptr);
    FLOE_ASSERT_OK(bplan->execute(ba, ws.ptr, bplan->workspace_bytes()));
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ++ran;

    const double scale = 1.0 / std::sqrt(static_cast<double>(kD));
    Samples so{"o"}, sl{"stats"}, sdq{"dq"}, sdk{"dk"}, sdv{"dv"};
    for (int64_t h : {int64_t{0}, kH - 1}) {
      // The head's inputs and the forward's o and stats, as the backward read them.
      auto to_double = [](const std::vector<float>& f) {
        return std::vector<double>(f.begin(), f.end());
      };
      const std::vector<double> Q = to_double(read_rows(q.ptr, DType::bf16, h * kS, kS));
      const std::vector<double> K = to_double(read_rows(k.ptr, DType::bf16, h * kS, kS));
      const std::vector<double> V = to_double(read_rows(v.ptr, DType::bf16, h * kS, kS));
      const std::vector<double> O = to_double(read_rows(o.ptr, DType::bf16, h * kS, kS));
      const std::vector<double> DO = to_double(read_rows(d_o.ptr, DType::bf16, h * kS, kS));
      const std::vector<float> L = read_floats(stats.ptr, h * kS, kS);
      std::vector<double> delta(kS);
      for (int64_t i = 0; i < kS; ++i) delta[i] = dot(&DO[i * kD], &O[i * kD]);
      auto p_ds = [&](int64_t i, int64_t j, double* p, double* ds) {
        *p = std::exp(scale * dot(&Q[i * kD], &K[j * kD]) - L[i]);
        *ds = *p * (dot(&DO[i * kD], &V[j * kD]) - delta[i]);
      };
      for (int64_t r : sampled_rows(kS)) {
        const std::string where = "h" + std::to_string(h) + " row " + std::to_string(r);
        // The forward, row r (causal: keys 0..r).
        std::vector<double> o_want;
        double lse = 0;
        forward_row(kS, h, r, 0, scale, &o_want, &lse);
        so.add(where, std::vector<double>(&O[r * kD], &O[(r + 1) * kD]), o_want);
        sl.add(where, {L[r]}, {lse});
        // dQ of query row r: keys 0..r.
        std::vector<double> dq_want(kD, 0.0);
        for (int64_t j = 0; j <= r; ++j) {
          double p, ds;
          p_ds(r, j, &p, &ds);
          for (int64_t d = 0; d < kD; ++d) dq_want[d] += scale * ds * K[j * kD + d];
        }
        // dK and dV of key row r: queries r..S-1.
        std::vector<double> dk_want(kD, 0.0), dv_want(kD, 0.0);
        for (int64_t i = r; i < kS; ++i) {
          double p, ds;
          p_ds(i, r, &p, &ds);
          for (int64_t d = 0; d < kD; ++d) {
            dk_want[d] += scale * ds * Q[i * kD + d];
            dv_want[d] += p * DO[i * kD + d];
          }
        }
        auto got = [&](const DeviceBuffer& b) {
          return to_double(read_rows(b.ptr, DType::bf16, h * kS + r, 1));
        };
        sdq.add(where, got(dq), dq_want);
        sdk.add(where, got(dk), dk_want);
        sdv.add(where, got(dv), dv_want);
      }
    }
    so.check(0.03, 1e-6);
    sl.check(1e-4, 0);
    sdq.check(0.04, 1e-6);
    sdk.check(0.04, 1e-6);
    sdv.check(0.04, 1e-6);
  }
  if (ran == 0) GTEST_SKIP() << "no fast engine served the problem";
}

}  // namespace
}  // namespace floe::test
