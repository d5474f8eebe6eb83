#include <cuda_runtime.h>

#include <string>

#include "support/gpu_spin.h"

namespace floe::test {

namespace {

__device__ unsigned long long global_time_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(unsigned long long ns) {
  const unsigned long long start = global_time_ns();
  while (global_time_ns() - start < ns) __nanosleep(5000);
}

}  // namespace

Status enqueue_spin(Stream stream, double milliseconds) {
  spin_kernel<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(milliseconds * 1e6));
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return Status(Code::device_error, std::string("spin kernel: ") + cudaGetErrorString(err));
  }
  return Status();
}

}  // namespace floe::test
