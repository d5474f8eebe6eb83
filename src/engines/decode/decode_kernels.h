// The decode engine's launchers: plain C++ declarations, defined in decode_kernels.cu. Each
// launches on `stream` and nothing else (P2), and names the kernel whose launch failed.
#pragma once

#include <cstddef>

#include "engines/decode/decode_params.h"
#include "floe/plan.h"
#include "floe/status.h"

namespace floe::detail::decode {

// Dynamic shared memory of the attention kernel for head dim d (64 or 128) and pipeline depth
// (d64: 4 stages; d128: 3, or 2 where the plan wants 3 CTAs an SM; 0: the default).
size_t attention_smem_bytes(int d, int stages = 0);

// Loads the kernels a plan launches and opts the attention kernel into its shared memory, at
// build: done lazily at execute, loading would wait for the device to go idle (P2).
Status load_kernels(const Params& p, bool bf16);

// A memset of the arrival counters (when the plan may split), the attention kernel (whose last
// CTA of a split batch merges its partials), then (ragged q) the padding of slot rows past s_q.
Status launch(const Params& p, bool bf16, Stream stream);

}  // namespace floe::detail::decode
