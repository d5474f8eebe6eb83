// sm80 planning: the rules both directions share (target, head dims, operand and bias
// layouts, the score-mod flag), the Facts -> Params pieces both fill the same way, and the
// plan-time shared-memory opt-in. Host code.
#pragma once

#include <cuda_runtime_api.h>

#include <climits>
#include <cstdint>
#include <string>

#include "floe/status.h"
#include "floe/target.h"
#include "kernels/band_mask.h"
#include "plan/facts.h"

namespace floe::detail::sm80 {

inline constexpr double kLog2e = 1.4426950408889634;
inline constexpr int64_t kInt32Max = INT32_MAX;

std::string tensor_name(TensorId id);
// Empty when sm80 serves the target; else why not.
std::string check_target(const Target& target);
// Head dims: multiples of 8, at most 256.
std::string check_head_dims(const Facts& f);
// Q, K, V, O-shaped tensors: unit innermost stride, 16-byte rows (outer strides multiples of 8
// elements), and a tile of `block_rows` rows addressable with 32-bit offsets.
std::string check_operand(const Facts& f, TensorId id, int block_rows);
// bias / dbias: a unit innermost stride.
std::string check_bias(const Facts& f, TensorId id);
// Softcap, bias or a negative scale: the score-mod kernels.
bool needs_score_mod(const Facts& f);

// The [b, h, s] element strides of a declared tensor.
inline void strides_of(const Facts& f, TensorId id, int64_t* sb, int64_t* sh, int64_t* ss) {
  const TensorDesc& d = f.t(id);
  *sb = d.strides[0];
  *sh = d.strides[1];
  *ss = d.strides[2];
}

// The score and mask fields FwdParams and BwdParams share (scores.cuh reads them).
template <class Params>
void fill_scores(const Facts& f, Params& p) {
  p.scale_log2 = static_cast<float>(f.scale * kLog2e);
  p.has_softcap = f.has_softcap;
  if (f.has_softcap) {
    p.cap_log2 = static_cast<float>(f.softcap * kLog2e);
    p.tanh_k = static_cast<float>(2.0 * kLog2e * f.scale / f.softcap);
  }
  p.mask = BandMask::from(f.mask);
  p.has_mask = f.mask.is_band();
}

// Plan time: opt a kernel into its shared memory on the target device (never in launch()).
template <class Kernel>
Status prepare_on_device(const Kernel& kernel, const Target& target) {
  if (!target.executable) return Status();
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess) {
    cudaGetLastError();
    current = -1;
  }
  if (current != target.device) cudaSetDevice(target.device);
  const cudaError_t err = kernel.prepare();
  if (current >= 0 && current != target.device) cudaSetDevice(current);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return Status(Code::device_error,
                  std::string("sm80: preparing ") + kernel.name + " (" +
                      std::to_string(kernel.smem_bytes) +
                      " bytes of shared memory) failed: " + cudaGetErrorString(err));
  }
  return Status();
}

}  // namespace floe::detail::sm80
