// Host time of Plan::execute on built plans, per engine and direction, on one small problem
// (1x1x128x128 bf16 unless given: B H S D), through the public API only, so that the same source
// links against two builds of libfloe.a for an A/B in one process each. µs per call: "queued" =
// calls back to back with no sync (each timed; median of 1000, best of three rounds), "alone" =
// the GPU idle before each call (median of 300). A plan the engine declines prints why.
//
//   g++ -O2 -std=c++17 -I include tools/dev/host_time.cc build/libfloe.a \
//       -L/usr/local/cuda/lib64 -lcudart_static -ldl -lpthread -lrt -o host_time
//   ./host_time [B H S D]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "floe/floe.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double time_calls(int n, bool alone, F&& f) {
  std::vector<double> us(static_cast<size_t>(n));
  for (double& t : us) {
    if (alone) cudaDeviceSynchronize();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  cudaDeviceSynchronize();
  return median(us);
}

}  // namespace

int main(int argc, char** argv) {
  floe::Shape shape{1, 1, 1, 128, 128, 128, 128};
  if (argc == 5) {
    shape.b = std::atoll(argv[1]);
    shape.h_q = shape.h_kv = std::atoll(argv[2]);
    shape.s_q = shape.s_kv = std::atoll(argv[3]);
    shape.d_qk = shape.d_v = std::atoll(argv[4]);
  }
  floe::Result<floe::Target> target = floe::Target::cuda();
  if (!target) {
    std::fprintf(stderr, "host_time: %s\n", target.status().message().c_str());
    return 1;
  }
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  const size_t elems = static_cast<size_t>(shape.b * shape.h_q * shape.s_q * shape.d_qk);
  std::vector<void*> bufs;
  for (const char* dir : {"fwd", "bwd"}) {
    for (const char* engine : {"auto", "sm90", "sm80", "generic"}) {
      const bool bwd = dir[0] == 'b';
      floe::Problem problem = bwd ? floe::Problem::backward(shape, floe::DType::bf16)
                                  : floe::Problem::forward(shape, floe::DType::bf16).set_stats();
      floe::PlanOptions options;
      options.engine = engine;
      floe::Result<floe::Plan> plan = floe::Plan::build(problem, *target, options);
      if (!plan) {
        std::printf("%s %-7s declined\n", dir, engine);
        continue;
      }
      floe::Arguments args;
      for (int i = 0; i < floe::kTensorCount; ++i) {
        const auto id = static_cast<floe::TensorId>(i);
        if (!problem.has(id)) continue;
        void* p = nullptr;
        cudaMalloc(&p, elems * 4 + 4096);
        cudaMemset(p, 0, elems * 4 + 4096);
        bufs.push_back(p);
        args.set(id, p);
      }
      void* ws = nullptr;
      const size_t ws_bytes = plan->workspace_bytes();
      if (ws_bytes) cudaMalloc(&ws, ws_bytes);
      bufs.push_back(ws);
      auto call = [&] {
        const floe::Status st = plan->execute(args, ws, ws_bytes, stream);
        if (!st) {
          std::fprintf(stderr, "host_time: %s\n", st.message().c_str());
          std::exit(1);
        }
      };
      for (int i = 0; i < 50; ++i) call();
      cudaDeviceSynchronize();
      double queued = 1e9;
      for (int r = 0; r < 3; ++r) queued = std::min(queued, time_calls(1000, false, call));
      const double alone = time_calls(300, true, call);
      std::printf("%s %-7s -> %-7s queued %6.2f us  alone %6.2f us\n", dir, engine,
                  plan->engine().c_str(), queued, alone);
    }
  }
  for (void* p : bufs) cudaFree(p);
  return 0;
}
