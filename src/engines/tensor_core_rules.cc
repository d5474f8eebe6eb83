#include "engines/tensor_core_rules.h"

#include <utility>

namespace floe::detail::tensor_core {

std::string tensor_name(TensorId id) {
  return std::string("tensor '") + to_string(id) + "'";
}

std::string check_operand(const char* engine, const Facts& f, TensorId id, int block_rows) {
  const TensorDesc& d = f.t(id);
  if (d.strides[3] != 1) {
    return tensor_name(id) + " strides[3] = " + std::to_string(d.strides[3]) + ": " + engine +
           " needs a unit innermost stride";
  }
  for (int i = 0; i < 3; ++i) {
    if (d.dims[i] > 1 && d.strides[i] % 8 != 0) {
      return tensor_name(id) + " strides[" + std::to_string(i) +
             "] = " + std::to_string(d.strides[i]) + ": " + engine +
             " needs 16-byte-aligned rows (every outer stride a multiple of 8 elements)";
    }
  }
  if (d.dims[2] > 1 && static_cast<int64_t>(block_rows) * d.strides[2] > kInt32Max) {
    return tensor_name(id) + " strides[2] = " + std::to_string(d.strides[2]) + ": " + engine +
           " addresses " + std::to_string(block_rows) + " rows at a time with 32-bit offsets; " +
           std::to_string(block_rows) + " x strides[2] must stay below 2^31";
  }
  return "";
}

std::string check_operands(const char* engine, const Facts& f,
                           std::initializer_list<TensorId> query_side, int block_m,
                           std::initializer_list<TensorId> key_side, int block_n,
                           std::initializer_list<TensorId> biases) {
  for (TensorId id : query_side) {
    if (std::string why = check_operand(engine, f, id, block_m); !why.empty()) return why;
  }
  for (TensorId id : key_side) {
    if (std::string why = check_operand(engine, f, id, block_n); !why.empty()) return why;
  }
  for (TensorId id : biases) {
    if (std::string why = check_bias(engine, f, id); !why.empty()) return why;
  }
  return "";
}

bool needs_score_mod(const Facts& f) {
  return f.has_softcap || f.has(TensorId::bias) || !(f.scale > 0);
}

kernels::ScoreMod score_mod_of(const Facts& f) {
  return kernels::score_mod_for(f.has_softcap, f.has(TensorId::bias), f.scale > 0);
}

std::string check_head_dims(const char* engine, const Facts& f) {
  for (const auto& [name, d] : {std::pair<const char*, int64_t>{"d_qk", f.d_qk}, {"d_v", f.d_v}}) {
    if (d % 8 != 0)
      return std::string("head dim ") + name + " = " + std::to_string(d) + ": " + engine +
             " needs a multiple of 8";
    if (d > 256)
      return std::string("head dim ") + name + " = " + std::to_string(d) + ": " + engine +
             " serves up to 256";
  }
  return "";
}

std::string check_bias(const char* engine, const Facts& f, TensorId id) {
  if (!f.has(id)) return "";
  const TensorDesc& b = f.t(id);
  if (b.dims[3] > 1 && b.strides[3] != 1) {
    return tensor_name(id) + " strides[3] = " + std::to_string(b.strides[3]) + ": " + engine +
           " needs a unit innermost stride";
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

Status launch_status(const char* engine, const char* kernel_name, cudaError_t err) {
  if (err == cudaSuccess) return Status();
  return Status(Code::device_error, std::string(engine) + ": launching " + kernel_name +
                                        " failed: " + cudaGetErrorString(err));
}

}  // namespace floe::detail::tensor_core
