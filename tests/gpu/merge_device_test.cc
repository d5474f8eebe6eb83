// The merge op on the device against the fp64 reference (the CPU plan) on the same inputs:
// random lse over a wide range with -inf rows (their O poisoned with NaN), both -inf, a NaN;
// f32, f16 and bf16 O; strided and head-major layouts; in place over part a; graph capture
// replaying bitwise what a direct execute gives, twice (deterministic). Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <cuda_runtime_api.h>

#include "common/dtype_convert.h"
#include "floe/floe.h"
#include "support/harness_gpu_test.h"

namespace floe {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Host copy of one tensor's storage (its span), as raw bytes.
struct Storage {
  std::vector<char> host;
  void* dev = nullptr;
};

class MergeGpu : public test::GpuTest {};

void fill(const TensorDesc& d, std::vector<char>& bytes, std::mt19937& rng, bool lse) {
  const size_t n = static_cast<size_t>(d.span());
  bytes.assign(n * size_of(d.dtype), 0);
  std::normal_distribution<float> dist;
  for (size_t i = 0; i < n; ++i) {
    float x = lse ? 20 * dist(rng) : dist(rng);
    if (lse && i % 7 == 3) x = -kInf;
    if (d.dtype == DType::f32) {
      std::memcpy(bytes.data() + 4 * i, &x, 4);
    } else {
      // f16/bf16: a value in range; the kernels read whatever bits are there.
      uint16_t h = d.dtype == DType::bf16 ? 0x3f80 ^ static_cast<uint16_t>(i * 37 % 512)
                                          : 0x3c00 ^ static_cast<uint16_t>(i * 37 % 512);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
}

TEST_F(MergeGpu, MatchesReferenceInPlaceAndUnderGraphs) {
  struct Config {
    DType oa, ob, o;
    bool in_place, head_major;
  };
  const Config configs[] = {{DType::f32, DType::f32, DType::f32, false, false},
                            {DType::f32, DType::f32, DType::f32, true, true},
                            {DType::bf16, DType::f32, DType::bf16, true, false},
                            {DType::f16, DType::f16, DType::f32, false, true}};
  Result<Target> gpu = Target::cuda();
  FLOE_ASSERT_OK(gpu);
  std::mt19937 rng(3);
  for (const Config& c : configs) {
    const int64_t B = 3, H = 5, S = 7, D = 96;
    MergeProblem p = MergeProblem::make(B, H, S, D, c.oa);
    p.set_dtype(MergeTensor::o_b, c.ob).set_dtype(MergeTensor::o, c.o);
    if (c.head_major) {
      p.set_strides(MergeTensor::o_b, {S * H * (D + 8), D + 8, H * (D + 8), 1});
      p.set_strides(MergeTensor::lse_b, {S, B * S, 1});
    }
    if (c.in_place) p.set_dtype(MergeTensor::o, c.oa);
    Result<MergePlan> dplan = MergePlan::build(p, *gpu);
    FLOE_ASSERT_OK(dplan);
    Result<MergePlan> hplan = MergePlan::build(p, Target::cpu(1));
    FLOE_ASSERT_OK(hplan);
    Storage st[kMergeTensorCount];
    for (int i = 0; i < kMergeTensorCount; ++i) {
      const auto id = static_cast<MergeTensor>(i);
      fill(p.tensor(id), st[i].host, rng, id == MergeTensor::lse_a || id == MergeTensor::lse_b);
      ASSERT_EQ(cudaSuccess, cudaMalloc(&st[i].dev, st[i].host.size()));
    }
    // A NaN lse in one row, and a -inf row in a whose O is poisoned.
    float nan = NAN;
    std::memcpy(st[1].host.data() + 4 * 5, &nan, 4);
    const auto upload = [&] {
      for (int i = 0; i < kMergeTensorCount; ++i) {
        const bool out = i >= 4;
        if (out) {
          std::vector<char> poison(st[i].host.size(), static_cast<char>(0xff));  // NaN
          ASSERT_EQ(cudaSuccess,
                    cudaMemcpy(st[i].dev, poison.data(), poison.size(), cudaMemcpyHostToDevice));
        } else {
          ASSERT_EQ(cudaSuccess, cudaMemcpy(st[i].dev, st[i].host.data(), st[i].host.size(),
                                            cudaMemcpyHostToDevice));
        }
      }
    };
    MergeArguments dargs, hargs;
    std::vector<std::vector<char>> host_out(kMergeTensorCount);
    for (int i = 0; i < kMergeTensorCount; ++i) {
      dargs.ptr[i] = st[i].dev;
      host_out[i] = st[i].host;
      hargs.ptr[i] = host_out[i].data();
    }
    if (c.in_place) {
      dargs.ptr[4] = st[0].dev;
      dargs.ptr[5] = st[1].dev;
      hargs.ptr[4] = hargs.ptr[0];
      hargs.ptr[5] = hargs.ptr[1];
    }
    FLOE_ASSERT_OK(hplan->execute(hargs));
    const auto download = [&](int i) {
      std::vector<char> out(st[i].host.size());
      EXPECT_EQ(cudaSuccess,
                cudaMemcpy(out.data(), dargs.ptr[i], out.size(), cudaMemcpyDeviceToHost));
      return out;
    };
    upload();
    FLOE_ASSERT_OK(dplan->execute(dargs));
    ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
    const int o_i = c.in_place ? 0 : 4, l_i = c.in_place ? 1 : 5;
    const std::vector<char> o1 = download(o_i), l1 = download(l_i);
    // Against the reference, element by element, through the output's dtype.
    const TensorDesc& od = p.tensor(MergeTensor::o);
    const TensorDesc& ld = p.tensor(MergeTensor::lse);
    int bad = 0;
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t s = 0; s < S; ++s) {
          const int64_t lo = b * ld.strides[0] + h * ld.strides[1] + s * ld.strides[2];
          float g, w;
          std::memcpy(&g, l1.data() + 4 * lo, 4);
          std::memcpy(&w, host_out[l_i].data() + 4 * lo, 4);
          const bool ok_l =
              std::isnan(w)
                  ? std::isnan(g)
                  : (std::isinf(w) ? g == w : std::fabs(g - w) <= 1e-5f * (1 + std::fabs(w)));
          if (!ok_l && bad++ < 5)
            ADD_FAILURE() << "lse (" << b << "," << h << "," << s << "): " << g << " vs " << w;
          for (int64_t d = 0; d < D; ++d) {
            const int64_t e =
                b * od.strides[0] + h * od.strides[1] + s * od.strides[2] + d * od.strides[3];
            // One rounding from fp32 vs one from fp64: at most an ulp apart.
            const float go = detail::load_as_float(o1.data(), e, od.dtype);
            const float wo = detail::load_as_float(host_out[o_i].data(), e, od.dtype);
            const float rtol =
                od.dtype == DType::f32 ? 1e-5f : (od.dtype == DType::bf16 ? 8e-3f : 1e-3f);
            const bool ok =
                std::isnan(wo) ? std::isnan(go) : std::fabs(go - wo) <= rtol * (1 + std::fabs(wo));
            if (!ok && bad++ < 5)
              ADD_FAILURE() << "o (" << b << "," << h << "," << s << "," << d << "): " << go
                            << " vs " << wo;
          }
        }
      }
    }
    EXPECT_EQ(bad, 0);

    // Graph replay: bitwise what the direct execute gave.
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    const Status captured = dplan->execute(dargs, stream);
    ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(stream, &graph));
    FLOE_ASSERT_OK(captured);
    ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&exec, graph, 0));
    for (int rep = 0; rep < 2; ++rep) {
      upload();
      ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, stream));
      ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream));
      EXPECT_EQ(download(o_i), o1);
      EXPECT_EQ(download(l_i), l1);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
    for (Storage& s : st) cudaFree(s.dev);
  }
}

}  // namespace
}  // namespace floe
