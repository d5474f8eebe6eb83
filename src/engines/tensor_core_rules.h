// What every tensor-core engine checks and fills at plan time, in both directions: head dims,
// operand and bias layouts (unit inner stride, 16-byte rows, 32-bit tile offsets), the
// score-mod flag, the compiled kernel, the Facts -> Params pieces (strides, score policy,
// lengths), the plan-time shared-memory opt-in and launch errors. `engine` names the engine in
// messages. What is one architecture's (its target check) stays in the engine's folder. Host
// code.
#pragma once

#include <cuda_runtime_api.h>

#include <climits>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "engines/engine.h"
#include "engines/facts.h"
#include "floe/arguments.h"
#include "floe/status.h"
#include "floe/target.h"
#include "kernels/band_mask.h"
#include "kernels/constants.h"
#include "kernels/score_mod_kind.h"
#include "kernels/score_params.h"
#include "kernels/strides.h"

namespace floe::detail::tensor_core {

inline constexpr int64_t kInt32Max = INT32_MAX;

std::string tensor_name(TensorId id);
// Head dims: multiples of 8, at most 256.
std::string check_head_dims(const char* engine, const Facts& f);
// Q, K, V, O-shaped tensors: unit innermost stride, 16-byte rows (outer strides multiples of 8
// elements), and a tile of `block_rows` rows addressable with 32-bit offsets.
std::string check_operand(const char* engine, const Facts& f, TensorId id, int block_rows);
// bias / dbias: a unit innermost stride.
std::string check_bias(const char* engine, const Facts& f, TensorId id);
// check_operand for the query-side operands (tiles of block_m rows), the key-side ones (block_n
// rows), then check_bias for the bias tensors: the first reason, or empty.
std::string check_operands(const char* engine, const Facts& f,
                           std::initializer_list<TensorId> query_side, int block_m,
                           std::initializer_list<TensorId> key_side, int block_n,
                           std::initializer_list<TensorId> biases);
// Softcap, bias or a negative scale: the score-mod kernels.
bool needs_score_mod(const Facts& f);
// The score-mod kind of a problem's kernel (kernels/score_mod_kind.h).
kernels::ScoreMod score_mod_of(const Facts& f);

// The compiled kernel of a choice: empty when it is in this build and its shared memory fits
// the target; else why not. `tile` names it in messages ("tile d128", "backward tile d128").
template <class Kernel>
std::string check_kernel(const Kernel* kernel, const std::string& tile, DType dtype,
                         kernels::ScoreMod mod, const Target& target) {
  if (kernel == nullptr) {
    return "kernel not built in the ci kernel set (" + tile + ", " + to_string(dtype) + ", " +
           kernels::score_mod_suffix(mod) + ")";
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

// The LaunchPlan of a tensor-core kernel: row operands aligned to 16 bytes.
class TensorCoreLaunchPlan : public LaunchPlan {
 public:
  size_t pointer_alignment(TensorId id, const Facts& facts) const override {
    return is_row_operand(id) ? 16 : LaunchPlan::pointer_alignment(id, facts);
  }
};

// The pointers a forward's and a backward's Params share, from one execute's Arguments.
template <class Params>
void set_shared_pointers(const Facts& f, const Arguments& args, Params& p) {
  p.q = args.get(TensorId::q);
  p.k = args.get(TensorId::k);
  p.v = args.get(TensorId::v);
  p.o = args.get(TensorId::o);
  if (f.has(TensorId::bias)) p.bias = args.get(TensorId::bias);
  if (f.has(TensorId::sink)) p.sink = static_cast<const float*>(args.get(TensorId::sink));
  if (f.has(TensorId::seq_len_q))
    p.lens.q = static_cast<const int32_t*>(args.get(TensorId::seq_len_q));
  if (f.has(TensorId::seq_len_kv))
    p.lens.kv = static_cast<const int32_t*>(args.get(TensorId::seq_len_kv));
}

// A launch's cudaError_t as a Status naming the kernel.
Status launch_status(const char* engine, const char* kernel_name, cudaError_t err);

// The [b, h, s] element strides of a tensor (zeros when it is not declared).
inline kernels::Strides3 strides_of(const Facts& f, TensorId id) {
  if (!f.has(id)) return {};
  const TensorDesc& d = f.t(id);
  return kernels::Strides3{d.strides[0], d.strides[1], d.strides[2]};
}
// A bias's strides, 0 in the dims it broadcasts (size 1), so that indexing by (b, h) works.
inline kernels::Strides3 bias_strides_of(const Facts& f, TensorId id) {
  kernels::Strides3 s = strides_of(f, id);
  if (f.has(id) && f.t(id).dims[0] == 1) s.b = 0;
  if (f.has(id) && f.t(id).dims[1] == 1) s.h = 0;
  return s;
}

// Whether a bias's (or dbias's) strides allow 16-byte loads (stores) of its rows (staged through
// shared memory), tiles
// of `block_rows` rows addressed with 32-bit offsets: every outer stride a multiple of 8
// elements. The pointer's alignment is checked per launch (bias_pointer_allows_vec).
inline bool bias_strides_allow_vec(const Facts& f, int block_rows, TensorId id = TensorId::bias) {
  if (!f.has(id)) return false;
  const kernels::Strides3 s = bias_strides_of(f, id);
  return s.b % 8 == 0 && s.h % 8 == 0 && s.s % 8 == 0 &&
         static_cast<int64_t>(block_rows) * s.s <= kInt32Max;
}
inline bool bias_pointer_allows_vec(const void* bias) {
  return bias != nullptr && reinterpret_cast<uintptr_t>(bias) % 16 == 0;
}

// The fields a forward's and a backward's Params share that come from the Facts alone: the score
// policy (kernels/score_params.h), the batch lengths' strides, and the sink's.
template <class Params>
void fill_shared(const Facts& f, Params& p) {
  constexpr double kLog2eD = kernels::kLog2eOf<double>;
  kernels::ScoreParams& s = p.score;
  s.scale_log2 = static_cast<float>(f.scale * kLog2eD);
  s.has_softcap = f.has_softcap;
  if (f.has_softcap) {
    s.cap_log2 = static_cast<float>(f.softcap * kLog2eD);
    s.tanh_k = static_cast<float>(2.0 * kLog2eD * f.scale / f.softcap);
  }
  s.mask = kernels::BandMask::from(f.mask);
  s.has_mask = f.mask.is_band();
  if (f.has(TensorId::seq_len_q)) p.lens.q_stride = f.t(TensorId::seq_len_q).strides[0];
  if (f.has(TensorId::seq_len_kv)) p.lens.kv_stride = f.t(TensorId::seq_len_kv).strides[0];
  if (f.has(TensorId::sink)) p.sink_stride = f.t(TensorId::sink).strides[0];
  p.b = static_cast<int32_t>(f.b);
  p.s_q = static_cast<int32_t>(f.s_q);
  p.s_kv = static_cast<int32_t>(f.s_kv);
  p.d_qk = static_cast<int32_t>(f.d_qk);
  p.d_v = static_cast<int32_t>(f.d_v);
}

// Plan time: f() (a cudaError_t) with the target's device current, the caller's restored after;
// nothing for a target without a device.
template <class F>
cudaError_t on_target_device(const Target& target, F&& f) {
  if (!target.executable) return cudaSuccess;
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess) {
    cudaGetLastError();
    current = -1;
  }
  if (current != target.device) cudaSetDevice(target.device);
  const cudaError_t err = f();
  if (current >= 0 && current != target.device) cudaSetDevice(current);
  return err;
}

// Plan time: opt a kernel into its shared memory on the target device (never in launch()).
template <class Kernel>
Status prepare_on_device(const char* engine, const Kernel& kernel, const Target& target) {
  const cudaError_t err = on_target_device(target, [&] { return kernel.prepare(); });
  if (err != cudaSuccess) {
    cudaGetLastError();
    return Status(Code::device_error,
                  std::string(engine) + ": preparing " + kernel.name + " (" +
                      std::to_string(kernel.smem_bytes) +
                      " bytes of shared memory) failed: " + cudaGetErrorString(err));
  }
  return Status();
}

// A direction's choice, asked of the same `choose(Choice*)` that gave the engine's decline
// reason: the planner builds only what the engine accepted, so a refusal here means the two
// disagree (a bug), not a user error.
template <class Choice, class Choose>
Result<Choice> accepted_choice(const char* engine, Choose&& choose) {
  Choice c;
  if (std::string why = choose(&c); !why.empty()) {
    return Status(Code::internal, std::string(engine) + " accepted, then declined: " + why);
  }
  return c;
}

// A plan's last step: the kernel opted into its shared memory on the target's device, then the
// LaunchPlan built from `args`.
template <class Plan, class Kernel, class... Args>
Result<std::unique_ptr<const LaunchPlan>> prepared_plan(const char* engine, const Kernel& kernel,
                                                        const Target& target, Args&&... args) {
  if (Status st = prepare_on_device(engine, kernel, target); !st) return st;
  return std::unique_ptr<const LaunchPlan>(std::make_unique<Plan>(std::forward<Args>(args)...));
}

}  // namespace floe::detail::tensor_core
