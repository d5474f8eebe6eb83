#include "floe/target.h"

#include <cuda_runtime_api.h>

#include <string>
#include <thread>

namespace floe {

Target Target::cpu(int threads) {
  Target t;
  t.kind = Kind::cpu;
  t.cpu_threads =
      threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return t;
}

Result<Target> Target::cuda(int device) {
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return Status(Code::device_error, "target: no current CUDA device");
  }
  cudaDeviceProp prop{};
  const cudaError_t err = cudaGetDeviceProperties(&prop, device);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return Status(Code::device_error,
                  "target: CUDA device " + std::to_string(device) + ": " + cudaGetErrorString(err));
  }
  Target t;
  t.kind = Kind::cuda;
  t.device = device;
  t.arch = prop.major * 10 + prop.minor;
  t.sm_count = prop.multiProcessorCount;
  t.smem_per_block_optin = prop.sharedMemPerBlockOptin;
  return t;
}

Target Target::cuda_arch(int arch) {
  Target t;
  t.kind = Kind::cuda;
  t.executable = false;
  t.arch = arch;
  if (arch >= 90) {
    t.sm_count = 132;
    t.smem_per_block_optin = 227 * 1024;
  } else if (arch == 80) {
    t.sm_count = 108;
    t.smem_per_block_optin = 163 * 1024;
  } else if (arch == 87) {  // Jetson AGX Orin: the A100's shared memory
    t.sm_count = 16;
    t.smem_per_block_optin = 163 * 1024;
  } else {
    t.sm_count = 84;
    t.smem_per_block_optin = 99 * 1024;
  }
  return t;
}

bool cuda_available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

}  // namespace floe
