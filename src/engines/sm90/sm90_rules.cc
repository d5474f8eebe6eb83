#include "engines/sm90/sm90_rules.h"

#include <cstdlib>

#include "engines/sm90/tma_descriptor.h"
#include "engines/tensor_core_rules.h"

namespace floe::detail::sm90 {

std::string tensor_name(TensorId id) {
  return std::string("tensor '") + to_string(id) + "'";
}

std::string read_switch(const char* name, int* value) {
  const char* env = std::getenv(name);
  const std::string text = env != nullptr ? env : "";
  *value = text.empty() ? -1 : text == "0" ? 0 : text == "1" ? 1 : -1;
  if (!text.empty() && *value < 0) return std::string(name) + "=" + text + ": must be 0 or 1";
  return "";
}

std::string check_target(const Target& target) {
  if (target.kind != Target::Kind::cuda) return "runs on CUDA devices only";
  if (target.arch != 90) {
    return "its kernels are built for sm_90a only (target is sm_" + std::to_string(target.arch) +
           ")";
  }
  if (target.executable) {
    if (std::string why = tma_encoder_status(); !why.empty()) return why;
    if (std::string why = kernel_launcher_status(); !why.empty()) return why;
  }
  return "";
}

namespace {

// The bias dims (batch, head) its tensor map keeps: a dim of size 1 or stride 0 is broadcast.
bool bias_dim_broadcast(const TensorDesc& d, int i) {
  return d.dims[i] == 1 || d.strides[i] == 0;
}

}  // namespace

std::string check_tma_bias(const Facts& f, TensorId id) {
  if (!f.has(id)) return "";
  const TensorDesc& d = f.t(id);
  const std::string name = tensor_name(id);
  const std::string how = id == TensorId::dbias ? ": sm90 stores dBias by TMA, which needs "
                                                : ": sm90 stages the bias by TMA, which needs ";
  if (d.dims[3] > 1 && d.strides[3] != 1) {
    return name + " strides[3] = " + std::to_string(d.strides[3]) + how + "a unit innermost stride";
  }
  for (int i = 0; i < 3; ++i) {
    if (i < 2 && bias_dim_broadcast(d, i)) continue;
    if (d.dims[i] <= 1) continue;
    if (d.strides[i] % 8 != 0 || d.strides[i] <= 0 || d.strides[i] >= (int64_t{1} << 39)) {
      return name + " strides[" + std::to_string(i) + "] = " + std::to_string(d.strides[i]) + how +
             (i < 2 ? "the strides of the batch and head dims it does not broadcast (stride 0 "
                      "or size 1 broadcasts)"
                    : "the row stride") +
             " a positive multiple of 8 elements (16 bytes) below 2^39";
    }
  }
  return "";
}

TmaMatrix tma_bias(const Facts& f, int box_rows, int32_t* b_step, int32_t* h_step, TensorId id) {
  const TensorDesc& d = f.t(id);
  const bool bcast_b = bias_dim_broadcast(d, 0), bcast_h = bias_dim_broadcast(d, 1);
  TmaMatrix t;
  t.b = bcast_b ? 1 : d.dims[0];
  t.h = bcast_h ? 1 : d.dims[1];
  t.rows = d.dims[2];
  t.cols = d.dims[3];
  t.stride_b = bcast_b ? 0 : d.strides[0];
  t.stride_h = bcast_h ? 0 : d.strides[1];
  t.stride_row = d.strides[2];
  t.box_rows = box_rows;
  t.bf16 = f.dtype == DType::bf16;
  *b_step = bcast_b ? 0 : 1;
  *h_step = bcast_h ? 0 : 1;
  return t;
}

std::string check_scale_and_sizes(const Facts& f) {
  if (!(f.scale > 0)) return "scale = " + std::to_string(f.scale) + ": sm90 needs a positive scale";
  if (f.b == 0 || f.h_q == 0 || f.s_q == 0 || f.s_kv == 0) {
    return "an empty dimension (b, h, s_q or s_kv = 0): sm90 needs non-empty tensors";
  }
  return "";
}

bool ragged_operand(const Facts& f, TensorId id) {
  switch (id) {
    case TensorId::q:
    case TensorId::o:
    case TensorId::stats:
      return f.ragged_q;
    case TensorId::k:
    case TensorId::v:
      return f.ragged_kv;
    default:
      return false;
  }
}

// Every check below reads the innermost dim as the last one: [b, h, s, d], or a ragged side's
// [T, h, d].
std::string check_tma_operand(const Facts& f, TensorId id) {
  const TensorDesc& d = f.t(id);
  const int inner = d.rank - 1;
  if (d.strides[inner] != 1) {
    return tensor_name(id) + " strides[" + std::to_string(inner) +
           "] = " + std::to_string(d.strides[inner]) +
           ": sm90's TMA loads need a unit innermost stride";
  }
  for (int i = 0; i < inner; ++i) {
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
  const int inner = d.rank - 1;
  if (d.strides[inner] != 1) {
    return tensor_name(id) + " strides[" + std::to_string(inner) +
           "] = " + std::to_string(d.strides[inner]) + ": sm90 needs a unit innermost stride";
  }
  for (int i = 0; i < inner; ++i) {
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
  const bool paged = f.paged_kv && (id == TensorId::k || id == TensorId::v);
  const bool ragged = ragged_operand(f, id);
  // Where the map's batch, head and row dims sit in the declaration: [b, h, s, d]; a ragged
  // side's [T, h, d] as [1, h, T, d] (the token dim is the row dim); a paged cache's
  // [pages, P, h, d] as [pages, h, P, d] (a box's rows lie within one page, one chunk a box).
  const int b_dim = ragged ? -1 : 0;
  const int h_dim = paged ? 2 : 1;
  const int s_dim = paged ? 1 : ragged ? 0 : 2;
  TmaTensor t;
  t.b = b_dim < 0 ? 1 : d.dims[b_dim];
  t.h = d.dims[h_dim];
  t.s = d.dims[s_dim];
  t.d = d.dims[d.rank - 1];
  t.stride_b = b_dim < 0 ? 0 : d.strides[b_dim];
  t.stride_h = d.strides[h_dim];
  t.stride_s = d.strides[s_dim];
  t.box_rows = box_rows;
  t.box_chunks = paged ? 1 : 0;
  t.bf16 = f.dtype == DType::bf16;
  return t;
}

}  // namespace floe::detail::sm90
