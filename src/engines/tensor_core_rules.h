// sm80 planning: the rules both directions share (target, head dims, operand and bias
// layouts, the score-mod flag), the Facts -> Params pieces both fill the same way, and the
// plan-time shared-memory opt-in. Host code.
#pragma once

#include <cuda_runtime_api.h>

#include <climits>
#include <cstdint>
#include <string>

#include "floe/arguments.h"
#include "floe/status.h"
#include "floe/target.h"
#include "kernels/band_mask.h"
#include "engines/facts.h"

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

// The compiled kernel of a choice: empty when it is in this build and its shared memory fits
// the target; else why not. `tile` names it in messages ("tile d128", "backward tile d128").
template <class Kernel>
std::string check_kernel(const Kernel* kernel, const std::string& tile, DType dtype, bool score_mod,
                         const Target& target) {
  if (kernel == nullptr) {
    return "kernel not built in the ci kernel set (" + tile + ", " + to_string(dtype) +
           (score_mod ? ", score-mod)" : ", plain)");
  }
  if (static_cast<size_t>(kernel->smem_bytes) > target.smem_per_block_optin) {
    return tile + " needs " + std::to_string(kernel->smem_bytes / 1024) +
           " KB of shared memory per block; the device allows " +
           std::to_string(target.smem_per_block_optin / 1024) + " KB";
  }
  return "";
}

// Q, K, V, O and their gradients are moved in 16-byte rows: their bases need 16-byte alignment.
bool is_row_operand(TensorId id);

// The pointers FwdParams and BwdParams share, from one execute's Arguments.
template <class Params>
void set_shared_pointers(const Facts& f, const Arguments& args, Params& p) {
  p.q = args.get(TensorId::q);
  p.k = args.get(TensorId::k);
  p.v = args.get(TensorId::v);
  p.o = args.get(TensorId::o);
  if (f.has(TensorId::bias)) p.bias = args.get(TensorId::bias);
  if (f.has(TensorId::sink)) p.sink = static_cast<const float*>(args.get(TensorId::sink));
  if (f.has(TensorId::seq_len_q))
    p.seq_len_q = static_cast<const int32_t*>(args.get(TensorId::seq_len_q));
  if (f.has(TensorId::seq_len_kv))
    p.seq_len_kv = static_cast<const int32_t*>(args.get(TensorId::seq_len_kv));
}

// A launch's cudaError_t as a Status naming the kernel.
Status launch_status(const char* kernel_name, cudaError_t err);

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
