#include "engines/sm90/sm90_rules.h"

#include "engines/sm90/tma_descriptor.h"

namespace floe::detail::sm90 {

std::string tensor_name(TensorId id) {
  return std::string("tensor '") + to_string(id) + "'";
}

std::string check_target(const Target& target) {
  if (target.kind != Target::Kind::cuda) return "runs on CUDA devices only";
  if (target.arch != 90) {
    return "its kernels are built for sm_90a only (target is sm_" + std::to_string(target.arch) +
           ")";
  }
  if (target.executable) {
    if (std::string why = tma_encoder_status(); !why.empty()) return why;
  }
  return "";
}

std::string check_no_score_mods(const Facts& f, const std::string& who) {
  if (f.has(TensorId::bias)) return "tensor 'bias': " + who + " has no bias yet";
  if (f.has(TensorId::sink)) return "tensor 'sink': " + who + " has no sink yet";
  if (f.has_softcap) return "softcap: " + who + " has no softcap yet";
  return "";
}

std::string check_scale_and_sizes(const Facts& f) {
  if (!(f.scale > 0)) return "scale = " + std::to_string(f.scale) + ": sm90 needs a positive scale";
  if (f.b == 0 || f.h_q == 0 || f.s_q == 0 || f.s_kv == 0) {
    return "an empty dimension (b, h, s_q or s_kv = 0): sm90 needs non-empty tensors";
  }
  return "";
}

std::string check_tma_operand(const Facts& f, TensorId id) {
  const TensorDesc& d = f.t(id);
  if (d.strides[3] != 1) {
    return tensor_name(id) + " strides[3] = " + std::to_string(d.strides[3]) +
           ": sm90's TMA loads need a unit innermost stride";
  }
  for (int i = 0; i < 3; ++i) {
    if (d.dims[i] <= 1) continue;
    if (d.strides[i] % 8 != 0 || d.strides[i] <= 0 || d.strides[i] >= (int64_t{1} << 39)) {
      return tensor_name(id) + " strides[" + std::to_string(i) +
             "] = " + std::to_string(d.strides[i]) +
             ": sm90's TMA loads need every outer stride a positive multiple of 8 elements "
             "(16 bytes) below 2^39";
    }
  }
  return "";
}

std::string check_row_tensor(const Facts& f, TensorId id) {
  const TensorDesc& d = f.t(id);
  if (d.strides[3] != 1) {
    return tensor_name(id) + " strides[3] = " + std::to_string(d.strides[3]) +
           ": sm90 needs a unit innermost stride";
  }
  for (int i = 0; i < 3; ++i) {
    if (d.dims[i] > 1 && d.strides[i] % 8 != 0) {
      return tensor_name(id) + " strides[" + std::to_string(i) +
             "] = " + std::to_string(d.strides[i]) +
             ": sm90 needs every outer stride a multiple of 8 elements (16 bytes)";
    }
  }
  return "";
}

TmaTensor tma_tensor(const Facts& f, TensorId id, int box_rows) {
  const TensorDesc& d = f.t(id);
  TmaTensor t;
  t.b = d.dims[0];
  t.h = d.dims[1];
  t.s = d.dims[2];
  t.d = d.dims[3];
  t.stride_b = d.strides[0];
  t.stride_h = d.strides[1];
  t.stride_s = d.strides[2];
  t.box_rows = box_rows;
  t.bf16 = f.dtype == DType::bf16;
  return t;
}

}  // namespace floe::detail::sm90
