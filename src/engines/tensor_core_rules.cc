#include "engines/tensor_core_rules.h"

#include <utility>

namespace floe::detail::sm80 {

std::string tensor_name(TensorId id) {
  return std::string("tensor '") + to_string(id) + "'";
}

std::string check_operand(const Facts& f, TensorId id, int block_rows) {
  const TensorDesc& d = f.t(id);
  if (d.strides[3] != 1) {
    return tensor_name(id) + " strides[3] = " + std::to_string(d.strides[3]) +
           ": sm80 needs a unit innermost stride";
  }
  for (int i = 0; i < 3; ++i) {
    if (d.dims[i] > 1 && d.strides[i] % 8 != 0) {
      return tensor_name(id) + " strides[" + std::to_string(i) +
             "] = " + std::to_string(d.strides[i]) +
             ": sm80 needs 16-byte-aligned rows (every outer stride a multiple of 8 elements)";
    }
  }
  if (d.dims[2] > 1 && static_cast<int64_t>(block_rows) * d.strides[2] > kInt32Max) {
    return tensor_name(id) + " strides[2] = " + std::to_string(d.strides[2]) + ": sm80 addresses " +
           std::to_string(block_rows) + " rows at a time with 32-bit offsets; " +
           std::to_string(block_rows) + " x strides[2] must stay below 2^31";
  }
  return "";
}

bool needs_score_mod(const Facts& f) {
  return f.has_softcap || f.has(TensorId::bias) || !(f.scale > 0);
}

std::string check_target(const Target& target) {
  if (target.kind != Target::Kind::cuda) return "runs on CUDA devices only";
  if (target.arch < 80) {
    return "needs sm_80 or newer (target is sm_" + std::to_string(target.arch) + ")";
  }
  if (target.arch >= 100) {
    return "its kernels are built for sm_80 and sm_90a; sm_" + std::to_string(target.arch) +
           " has no image of them";
  }
  return "";
}

std::string check_head_dims(const Facts& f) {
  for (const auto& [name, d] : {std::pair<const char*, int64_t>{"d_qk", f.d_qk}, {"d_v", f.d_v}}) {
    if (d % 8 != 0)
      return std::string("head dim ") + name + " = " + std::to_string(d) +
             ": sm80 needs a multiple of 8";
    if (d > 256)
      return std::string("head dim ") + name + " = " + std::to_string(d) +
             ": sm80 serves up to 256";
  }
  return "";
}

std::string check_bias(const Facts& f, TensorId id) {
  if (!f.has(id)) return "";
  const TensorDesc& b = f.t(id);
  if (b.dims[3] > 1 && b.strides[3] != 1) {
    return tensor_name(id) + " strides[3] = " + std::to_string(b.strides[3]) +
           ": sm80 needs a unit innermost stride";
  }
  return "";
}

bool is_row_operand(TensorId id) {
  switch (id) {
    case TensorId::q:
    case TensorId::k:
    case TensorId::v:
    case TensorId::o:
    case TensorId::d_o:
    case TensorId::dq:
    case TensorId::dk:
    case TensorId::dv:
      return true;
    default:
      return false;
  }
}

Status launch_status(const char* kernel_name, cudaError_t err) {
  if (err == cudaSuccess) return Status();
  return Status(Code::device_error, std::string("sm80: launching ") + kernel_name +
                                        " failed: " + cudaGetErrorString(err));
}

}  // namespace floe::detail::sm80
