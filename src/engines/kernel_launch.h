// Launching a kernel through the driver's cuLaunchKernel on a function resolved at plan time.
// The runtime's <<<>>> maps the kernel's host symbol to the current context's function on every
// launch; a plan knows its device and kernels when it is built, so it resolves them there and
// its execute only launches (tools/dev/launch_cost.cu measures what either costs the host). The
// driver entry point comes through the runtime: floe needs no link to libcuda.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "floe/plan.h"
#include "floe/status.h"

namespace floe::detail {

// One kernel's function in the primary context of the device a plan was built for.
struct DeviceKernel {
  cudaFunction_t function = nullptr;
};

// Empty when the driver's launcher is available (resolved once, thread-safe); else why not.
std::string kernel_launcher_status();

// Plan time, with the plan's device current: the function of `symbol` (a __global__ function's
// host address), its module loaded if it was not yet (lazy loading).
cudaError_t resolve_kernel(const void* symbol, DeviceKernel* out);

// Launch time: one launch of `kernel`, whose single parameter is the struct at `params`, on
// `stream`; no allocation, no sync. 0 or the driver's error (a CUresult).
int launch_kernel(const DeviceKernel& kernel, unsigned grid, int threads, int smem_bytes,
                  Stream stream, const void* params);

// Whether a launch_kernel error means that the calling thread's current context is not the one
// the kernel was resolved in (a thread that has not used the runtime yet, or a context of its
// own): the caller then launches through the runtime (<<<>>>), which binds the context.
bool is_context_error(int error);

// A thread that has never called CUDA has no current context, and the driver calls a plan makes
// at execute fail there (cuTensorMapEncodeTiled: sm90/tma_descriptor.cc retries through this;
// cuLaunchKernel: the caller falls back to the runtime's launch). Called after such a failure:
// when the thread has no current context, makes its current device's primary context current,
// as the runtime's first call on a thread does (no allocation, no sync), and returns true (the
// caller retries once); false when a context was current (the failure is another).
bool bind_thread_context();

// "ENGINE: launching NAME failed: <the driver's message> (CUresult N)".
Status launch_error(const char* engine, const char* name, int error);

}  // namespace floe::detail
