#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "support/gpu_hash_fill.h"

namespace floe::test {

namespace {

template <class T>
__global__ void fill_kernel(T* out, int64_t count, uint64_t seed) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += step) {
    out[i] = static_cast<T>(hash_value(static_cast<uint64_t>(i), seed));
  }
}

}  // namespace

Status fill_hashed(void* ptr, DType dtype, int64_t count, uint64_t seed, Stream stream) {
  constexpr int kThreads = 256, kBlocks = 4096;
  auto s = static_cast<cudaStream_t>(stream);
  if (dtype == DType::bf16) {
    fill_kernel<<<kBlocks, kThreads, 0, s>>>(static_cast<__nv_bfloat16*>(ptr), count, seed);
  } else if (dtype == DType::f16) {
    fill_kernel<<<kBlocks, kThreads, 0, s>>>(static_cast<__half*>(ptr), count, seed);
  } else {
    return Status(Code::invalid_argument, "fill_hashed: f16 or bf16 only");
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return Status(Code::device_error, std::string("fill kernel: ") + cudaGetErrorString(err));
  }
  return Status();
}

}  // namespace floe::test
