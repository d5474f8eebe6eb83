#include "floe/problem.h"

#include <cstdint>

namespace floe {

Problem::Problem(Direction direction, const Shape& shape, DType dtype)
    : direction_(direction), dtype_(dtype), shape_(shape) {
  declare_layout();
}

void Problem::declare_layout() {
  const Shape& s = shape_;
  const bool bwd = direction_ == Direction::backward;
  auto q_side = [&](TensorId id, int64_t d) {
    if (ragged_q_) {
      declare(id, dtype_, {ragged_q_->total, s.h_q, d});
    } else {
      declare(id, dtype_, {s.b, s.h_q, s.s_q, d});
    }
  };
  auto kv_side = [&](TensorId id, int64_t d) {
    if (paged_kv_) {
      declare(id, dtype_, {paged_kv_->num_pages, paged_kv_->page_size, s.h_kv, d});
    } else if (ragged_kv_) {
      declare(id, dtype_, {ragged_kv_->total, s.h_kv, d});
    } else {
      declare(id, dtype_, {s.b, s.h_kv, s.s_kv, d});
    }
  };
  q_side(TensorId::q, s.d_qk);
  kv_side(TensorId::k, s.d_qk);
  kv_side(TensorId::v, s.d_v);
  q_side(TensorId::o, s.d_v);
  if (bwd) {
    q_side(TensorId::d_o, s.d_v);
    q_side(TensorId::dq, s.d_qk);
    kv_side(TensorId::dk, s.d_qk);
    kv_side(TensorId::dv, s.d_v);
  }
  if (bwd || has(TensorId::stats)) declare_stats();
  // The offsets hold b + 1 entries; b + 1 saturates rather than wrapping for a b validation
  // refuses anyway.
  const int64_t b1 = s.b < INT64_MAX ? s.b + 1 : s.b;
  auto& oq = tensors_[index_of(TensorId::offsets_q)];
  auto& okv = tensors_[index_of(TensorId::offsets_kv)];
  auto& table = tensors_[index_of(TensorId::block_table)];
  if (ragged_q_) {
    declare(TensorId::offsets_q, ragged_q_->offsets_dtype, {b1});
  } else {
    oq.reset();
  }
  if (ragged_kv_) {
    declare(TensorId::offsets_kv, ragged_kv_->offsets_dtype, {b1});
  } else {
    okv.reset();
  }
  if (paged_kv_) {
    declare(TensorId::block_table, DType::i32, {s.b, paged_kv_->max_pages});
  } else {
    table.reset();
  }
}

void Problem::declare_stats() {
  if (ragged_q_) {
    declare(TensorId::stats, DType::f32, {ragged_q_->total, shape_.h_q});
  } else {
    declare(TensorId::stats, DType::f32, {shape_.b, shape_.h_q, shape_.s_q});
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
    declare_stats();
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

Problem& Problem::set_ragged_q(int64_t total_q, DType offsets_dtype) {
  ragged_q_ = Ragged{total_q, offsets_dtype};
  declare_layout();
  return *this;
}

Problem& Problem::set_ragged_kv(int64_t total_kv, DType offsets_dtype) {
  ragged_kv_ = Ragged{total_kv, offsets_dtype};
  declare_layout();
  return *this;
}

Problem& Problem::set_paged_kv(int64_t page_size, int64_t num_pages, int64_t max_pages) {
  if (max_pages == 0 && page_size > 0) {
    max_pages = shape_.s_kv / page_size + (shape_.s_kv % page_size != 0 ? 1 : 0);
  }
  paged_kv_ = Paged{page_size, num_pages, max_pages};
  declare_layout();
  return set_seq_len_kv(true);
}

Problem& Problem::clear_ragged_q() {
  ragged_q_.reset();
  declare_layout();
  return *this;
}

Problem& Problem::clear_ragged_kv() {
  ragged_kv_.reset();
  declare_layout();
  return *this;
}

Problem& Problem::clear_paged_kv() {
  paged_kv_.reset();
  declare_layout();
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

Problem& Problem::set_split_tokens(std::optional<int64_t> n) {
  split_tokens_ = n;
  return *this;
}

}  // namespace floe
