// What a kernel launch and the calls around one cost on the host, apart from floe: empty kernels
// of several parameter sizes launched with <<<>>>, cudaLaunchKernel, cudaLaunchKernelEx and the
// driver's cuLaunchKernel (function resolved once), plus cudaGetDevice, cudaGetLastError and one
// 5-D cuTensorMapEncodeTiled as floe's sm90 plans encode them. µs per call: "queued" = calls
// back to back with no sync (each call timed; median of 2000), "alone" = the GPU idle before
// each call (median of 300).
//
//   nvcc -O2 -std=c++17 -arch=sm_90a -o launch_cost tools/dev/launch_cost.cu && ./launch_cost
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

namespace {

template <int kBytes>
struct Blob {
  alignas(16) unsigned char b[kBytes];
};

__global__ void k_small(int x) {
  if (x == 12345) printf("never\n");
}
template <int kBytes>
__global__ void k_blob(const __grid_constant__ Blob<kBytes> p) {
  if (p.b[0] == 123 && p.b[kBytes - 1] == 45) printf("never\n");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// µs per call of f: queued and alone.
void time_it(const char* name, const std::function<void()>& f, bool sync_alone = true) {
  for (int i = 0; i < 50; ++i) f();
  cudaDeviceSynchronize();
  std::vector<double> q(2000);
  for (double& t : q) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  cudaDeviceSynchronize();
  std::vector<double> a(300);
  for (double& t : a) {
    if (sync_alone) cudaDeviceSynchronize();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  cudaDeviceSynchronize();
  std::printf("%-58s queued %6.2f  alone %6.2f  min %6.2f\n", name, median(q), median(a),
              *std::min_element(q.begin(), q.end()));
}

}  // namespace

int main() {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaFree(nullptr);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found;
  cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000, cudaEnableDefault, &found);
  auto cu_launch = reinterpret_cast<PFN_cuLaunchKernel_v4000>(fn);
  cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found);
  auto encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);

  Blob<8> b8{};
  Blob<704> b704{};
  Blob<2048> b2k{};
  int x = 1;
  cudaFunction_t f_small, f_704, f_2k;
  cudaGetFuncBySymbol(&f_small, reinterpret_cast<const void*>(k_small));
  cudaGetFuncBySymbol(&f_704, reinterpret_cast<const void*>(k_blob<704>));
  cudaGetFuncBySymbol(&f_2k, reinterpret_cast<const void*>(k_blob<2048>));
  cudaFuncSetAttribute(k_blob<704>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);

  std::printf("launch_cost: µs per call (host), %s\n", [] {
    static cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    return p.name;
  }());
  time_it("<<<>>> int param", [&] { k_small<<<1, 128, 0, s>>>(x); });
  time_it("<<<>>> 8 B", [&] { k_blob<8><<<1, 128, 0, s>>>(b8); });
  time_it("<<<>>> 704 B (sm90 fwd params: 3 tensor maps)",
          [&] { k_blob<704><<<1, 128, 0, s>>>(b704); });
  time_it("<<<>>> 2048 B", [&] { k_blob<2048><<<1, 128, 0, s>>>(b2k); });
  time_it("<<<>>> 704 B + cudaGetLastError", [&] {
    k_blob<704><<<1, 128, 0, s>>>(b704);
    cudaGetLastError();
  });
  time_it("3x <<<>>> 704 B (sm90 bwd's three launches)", [&] {
    k_blob<704><<<1, 128, 0, s>>>(b704);
    k_blob<704><<<1, 128, 0, s>>>(b704);
    k_blob<704><<<1, 128, 0, s>>>(b704);
  });
  time_it("<<<>>> 704 B, 132 CTAs x 384 thr, 200 KB smem",
          [&] { k_blob<704><<<132, 384, 200 * 1024, s>>>(b704); });
  void* args704[] = {&b704};
  void* args8[] = {&x};
  time_it("cudaLaunchKernel 704 B", [&] {
    cudaLaunchKernel(reinterpret_cast<const void*>(k_blob<704>), dim3(1), dim3(128), args704, 0, s);
  });
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(1);
  cfg.blockDim = dim3(128);
  cfg.stream = s;
  time_it("cudaLaunchKernelEx 704 B", [&] { cudaLaunchKernelEx(&cfg, k_blob<704>, b704); });
  time_it("cuLaunchKernel int param (CUfunction resolved once)", [&] {
    cu_launch(reinterpret_cast<CUfunction>(f_small), 1, 1, 1, 128, 1, 1, 0, s, args8, nullptr);
  });
  time_it("cuLaunchKernel 704 B", [&] {
    cu_launch(reinterpret_cast<CUfunction>(f_704), 1, 1, 1, 128, 1, 1, 0, s, args704, nullptr);
  });
  void* args2k[] = {&b2k};
  time_it("cuLaunchKernel 2048 B", [&] {
    cu_launch(reinterpret_cast<CUfunction>(f_2k), 1, 1, 1, 128, 1, 1, 0, s, args2k, nullptr);
  });
  time_it(
      "cudaGetDevice",
      [&] {
        int d;
        cudaGetDevice(&d);
      },
      false);
  time_it(
      "cudaGetLastError", [&] { cudaGetLastError(); }, false);
  void* buf = nullptr;
  cudaMalloc(&buf, 1 << 20);
  alignas(128) CUtensorMap map;
  time_it(
      "cuTensorMapEncodeTiled (5-D, bf16, SW128, floe's Q)",
      [&] {
        const cuuint64_t dims[5] = {64, 128, 2, 1, 1};
        const cuuint64_t strides[4] = {256, 128, 32768, 32768};
        const cuuint32_t box[5] = {64, 128, 2, 1, 1};
        const cuuint32_t es[5] = {1, 1, 1, 1, 1};
        encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 5, buf, dims, strides, box, es,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      },
      false);
  cudaStreamSynchronize(s);
  std::printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
