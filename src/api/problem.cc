#include "floe/problem.h"

namespace floe {

Problem::Problem(Direction direction, const Shape& shape, DType dtype)
    : direction_(direction), dtype_(dtype), shape_(shape) {
  const Shape& s = shape;
  declare(TensorId::q, dtype, {s.b, s.h_q, s.s_q, s.d_qk});
  declare(TensorId::k, dtype, {s.b, s.h_kv, s.s_kv, s.d_qk});
  declare(TensorId::v, dtype, {s.b, s.h_kv, s.s_kv, s.d_v});
  declare(TensorId::o, dtype, {s.b, s.h_q, s.s_q, s.d_v});
  if (direction == Direction::backward) {
    declare(TensorId::d_o, dtype, {s.b, s.h_q, s.s_q, s.d_v});
    declare(TensorId::stats, DType::f32, {s.b, s.h_q, s.s_q});
    declare(TensorId::dq, dtype, {s.b, s.h_q, s.s_q, s.d_qk});
    declare(TensorId::dk, dtype, {s.b, s.h_kv, s.s_kv, s.d_qk});
    declare(TensorId::dv, dtype, {s.b, s.h_kv, s.s_kv, s.d_v});
  }
}

Problem Problem::forward(const Shape& shape, DType dtype) {
  return Problem(Direction::forward, shape, dtype);
}

Problem Problem::backward(const Shape& shape, DType dtype) {
  return Problem(Direction::backward, shape, dtype);
}

void Problem::declare(TensorId id, DType dtype, std::initializer_list<int64_t> dims) {
  tensors_[index_of(id)] = TensorDesc::packed(dtype, dims);
}

Problem& Problem::set_tensor(TensorId id, const TensorDesc& desc) {
  tensors_[index_of(id)] = desc;
  return *this;
}

Problem& Problem::set_strides(TensorId id, std::initializer_list<int64_t> strides) {
  auto& t = tensors_[index_of(id)];
  if (!t) {
    if (setter_error_.empty()) {
      setter_error_ = std::string("tensor '") + to_string(id) +
                      "' strides: given for a tensor this problem does not declare";
    }
    return *this;
  }
  if (static_cast<int>(strides.size()) != t->rank) {
    if (setter_error_.empty()) {
      setter_error_ = std::string("tensor '") + to_string(id) +
                      "' strides: " + std::to_string(strides.size()) +
                      " given, the tensor has rank " + std::to_string(t->rank);
    }
    return *this;
  }
  int i = 0;
  for (int64_t s : strides) t->strides[i++] = s;
  return *this;
}

Problem& Problem::set_stats(bool on) {
  if (direction_ == Direction::backward) return *this;  // always read in backward
  if (on) {
    declare(TensorId::stats, DType::f32, {shape_.b, shape_.h_q, shape_.s_q});
  } else {
    tensors_[index_of(TensorId::stats)].reset();
  }
  return *this;
}

Problem& Problem::set_bias(int64_t b_dim, int64_t h_dim) {
  declare(TensorId::bias, dtype_, {b_dim, h_dim, shape_.s_q, shape_.s_kv});
  if (direction_ == Direction::backward) {
    declare(TensorId::dbias, dtype_, {b_dim, h_dim, shape_.s_q, shape_.s_kv});
  }
  return *this;
}

Problem& Problem::set_bias_grad(bool on) {
  if (!on) {
    tensors_[index_of(TensorId::dbias)].reset();
  } else if (const auto& bias = tensors_[index_of(TensorId::bias)]) {
    declare(TensorId::dbias, dtype_, {bias->dims[0], bias->dims[1], shape_.s_q, shape_.s_kv});
  }
  return *this;
}

Problem& Problem::set_sink(bool on) {
  if (on) {
    declare(TensorId::sink, DType::f32, {shape_.h_q});
    if (direction_ == Direction::backward) declare(TensorId::dsink, DType::f32, {shape_.h_q});
  } else {
    tensors_[index_of(TensorId::sink)].reset();
    tensors_[index_of(TensorId::dsink)].reset();
  }
  return *this;
}

Problem& Problem::set_seq_len_q(bool on) {
  if (on) {
    declare(TensorId::seq_len_q, DType::i32, {shape_.b});
  } else {
    tensors_[index_of(TensorId::seq_len_q)].reset();
  }
  return *this;
}

Problem& Problem::set_seq_len_kv(bool on) {
  if (on) {
    declare(TensorId::seq_len_kv, DType::i32, {shape_.b});
  } else {
    tensors_[index_of(TensorId::seq_len_kv)].reset();
  }
  return *this;
}

Problem& Problem::set_scale(double scale) {
  scale_ = scale;
  return *this;
}

Problem& Problem::set_softcap(double cap) {
  softcap_ = cap;
  return *this;
}

Problem& Problem::set_mask(const Mask& mask) {
  mask_ = mask;
  return *this;
}

Problem& Problem::set_causal(MaskAlign align) {
  return set_mask(Mask{align, std::nullopt, int64_t{0}});
}

Problem& Problem::set_window(std::optional<int64_t> left, std::optional<int64_t> right,
                             MaskAlign align) {
  return set_mask(Mask{align, left, right});
}

Problem& Problem::set_deterministic(bool on) {
  deterministic_ = on;
  return *this;
}

}  // namespace floe
