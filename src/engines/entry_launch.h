// A kernel-table entry's launch steps (kernel_table.h) resolved at plan time and launched
// through the driver at execute (kernel_launch.h), with one fallback policy for every engine
// that launches this way: a thread whose current context is not the plan's finds out at the
// first step and launches the whole entry through the runtime, which binds its context.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <string>

#include "engines/kernel_launch.h"
#include "engines/kernel_table.h"
#include "engines/tensor_core_rules.h"
#include "floe/plan.h"
#include "floe/status.h"
#include "floe/target.h"

namespace floe::detail {

// The functions of an entry's steps on the plan's device (null for a target without one).
using StepFunctions = std::array<DeviceKernel, LaunchSteps::kMax>;

// Plan time: every step of `steps` (kernel_name's kernels) resolved on the target's device;
// nothing for a target without a device, which cannot execute.
inline Status resolve_steps(const char* engine, const char* kernel_name, const LaunchSteps& steps,
                            const Target& target, StepFunctions* out) {
  for (int i = 0; i < steps.count; ++i) {
    const cudaError_t err = tensor_core::on_target_device(
        target, [&] { return resolve_kernel(steps.step[i].symbol, &(*out)[i]); });
    if (err != cudaSuccess) {
      cudaGetLastError();
      return Status(Code::device_error, std::string(engine) + ": resolving " + kernel_name +
                                            " on device " + std::to_string(target.device) +
                                            " failed: " + cudaGetErrorString(err));
    }
  }
  return Status();
}

// Launch time: the entry's steps in stream order, each with the one parameter `params` and the
// CTA count grid_of_step(i); no allocation, no sync. The runtime fallback relaunches nothing
// twice: only the first step can meet a context error.
template <class Params, class Grid, class GridOfStep>
Status launch_steps(const char* engine, const KernelEntry<Params, Grid>& entry,
                    const StepFunctions& functions, const Grid& grid, GridOfStep&& grid_of_step,
                    const Params& params, Stream stream) {
  for (int i = 0; i < entry.steps.count; ++i) {
    const LaunchStep& s = entry.steps.step[i];
    const auto grid_i = grid_of_step(i);
    if (grid_i == 0) continue;  // a step this problem does not need (sm90's dBias sum)
    const int err = launch_kernel(functions[i], grid_i, s.threads, s.smem_bytes, stream, &params);
    if (err == 0) continue;
    if (i > 0 || !is_context_error(err)) return launch_error(engine, entry.name, err);
    return tensor_core::launch_status(
        engine, entry.name, entry.launch(params, grid, reinterpret_cast<cudaStream_t>(stream)));
  }
  return Status();
}

}  // namespace floe::detail
