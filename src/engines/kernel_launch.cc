#include "engines/kernel_launch.h"

#include <cuda.h>
#include <cudaTypedefs.h>

namespace floe::detail {
namespace {

struct Launcher {
  PFN_cuLaunchKernel_v4000 launch = nullptr;
  PFN_cuGetErrorString_v6000 error_string = nullptr;
  PFN_cuCtxGetCurrent_v4000 current_context = nullptr;
};

template <class Fn>
Fn entry_point(const char* symbol, int version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t err =
      cudaGetDriverEntryPointByVersion(symbol, &fn, version, cudaEnableDefault, &found);
  if (err != cudaSuccess || found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<Fn>(fn);
}

const Launcher& launcher() {
  static const Launcher l{entry_point<PFN_cuLaunchKernel_v4000>("cuLaunchKernel", 4000),
                          entry_point<PFN_cuGetErrorString_v6000>("cuGetErrorString", 6000),
                          entry_point<PFN_cuCtxGetCurrent_v4000>("cuCtxGetCurrent", 4000)};
  return l;
}

}  // namespace

std::string kernel_launcher_status() {
  return launcher().launch != nullptr ? std::string() : "the driver has no cuLaunchKernel";
}

cudaError_t resolve_kernel(const void* symbol, DeviceKernel* out) {
  return cudaGetFuncBySymbol(&out->function, symbol);
}

int launch_kernel(const DeviceKernel& kernel, unsigned grid, int threads, int smem_bytes,
                  Stream stream, const void* params) {
  void* args[] = {const_cast<void*>(params)};
  return launcher().launch(reinterpret_cast<CUfunction>(kernel.function), grid, 1, 1,
                           static_cast<unsigned>(threads), 1, 1, static_cast<unsigned>(smem_bytes),
                           reinterpret_cast<CUstream>(stream), args, nullptr);
}

bool is_context_error(int error) {
  return error == CUDA_ERROR_INVALID_CONTEXT || error == CUDA_ERROR_CONTEXT_IS_DESTROYED ||
         error == CUDA_ERROR_INVALID_HANDLE;
}

bool bind_thread_context() {
  const auto current = launcher().current_context;
  CUcontext ctx = nullptr;
  if (current == nullptr || current(&ctx) != CUDA_SUCCESS || ctx != nullptr) return false;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return true;
}

Status launch_error(const char* engine, const char* name, int error) {
  const char* text = nullptr;
  const auto to_text = launcher().error_string;
  if (to_text == nullptr || to_text(static_cast<CUresult>(error), &text) != CUDA_SUCCESS ||
      text == nullptr) {
    text = "unknown driver error";
  }
  return Status(Code::device_error, std::string(engine) + ": launching " + name + " failed: " +
                                        text + " (CUresult " + std::to_string(error) + ")");
}

}  // namespace floe::detail
