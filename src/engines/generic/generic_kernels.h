// The generic engine's launchers: plain C++ declarations, defined in the .cu files. Each
// launches its kernels on `stream` and nothing else (P2), and names the kernel whose launch
// failed.
#pragma once

#include <string>

#include "engines/generic/generic_params.h"
#include "floe/plan.h"
#include "floe/status.h"

namespace floe::detail::generic {

// Whether this build holds machine code of the generic kernels that runs on compute
// capability `arch` (10 * major + minor): code for X.Y runs on X.Z, Z >= Y.
bool kernels_built_for(int arch);
// The architectures this build holds the kernels for, as "sm_80, sm_90".
std::string built_archs();
// The target rule of the engines whose kernels build with these architectures (generic and
// decode): a CUDA device of compute capability 8.0 or newer that this build has code for; ""
// when the target passes, else the reason.
std::string check_target(const Target& target);

// Loads the kernels a plan will launch. CUDA loads modules lazily by default, and loading
// waits for the device to go idle: done at execute, the first call would block the host
// behind whatever the caller's streams run (P2). Plans with an executable target call these.
Status load_forward_kernels(const Params& p, const Geometry& geo);
Status load_backward_kernels(const Geometry& geo);

// Forward: O (and stats when declared).
Status launch_forward(const Params& p, const Geometry& geo, Stream stream);
// Backward: delta, then dsink (if declared), dK/dV, dQ, then dbias (if declared).
Status launch_backward(const Params& p, const Geometry& geo, Stream stream);

}  // namespace floe::detail::generic
