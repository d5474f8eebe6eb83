// One readable description of an attention problem (DESIGN §2), forward or backward.
//
//   auto p = floe::Problem::forward({/*b*/2, /*h_q*/16, /*h_kv*/4, /*s_q*/1024, /*s_kv*/1024,
//                                    /*d_qk*/128, /*d_v*/128}, floe::DType::bf16)
//                .set_causal()
//                .set_stats();
//
// Every tensor starts packed in logical order [B, H, S, D]; set_strides() declares the layout
// the caller really has, set_tensor() replaces a description wholesale. Nothing is checked
// here: Plan::build() validates and names the tensor, the field and the rule it breaks.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "floe/tensor.h"

namespace floe {

enum class Direction : uint8_t { forward, backward };
enum class MaskAlign : uint8_t { top_left, bottom_right };

// A diagonal band: key j is visible to query i iff (no left or j >= i + off - left) and
// (no right or j <= i + off + right), with off = 0 (top_left) or s_kv_b - s_q_b (bottom_right).
struct Mask {
  MaskAlign align = MaskAlign::top_left;
  std::optional<int64_t> left;
  std::optional<int64_t> right;

  bool is_band() const { return left.has_value() || right.has_value(); }
};

// b, s_q and s_kv are the envelope of a ragged or paged problem (DESIGN 2.1): the batch count
// and the longest sequence a plan serves; the lengths themselves are read on the device.
struct Shape {
  int64_t b = 1, h_q = 1, h_kv = 1, s_q = 1, s_kv = 1, d_qk = 64, d_v = 64;
};

// A packed (THD) side: `total` tokens at plan time, batch b's slot starting at token
// offsets[b] (a device array [B + 1] of `offsets_dtype`, i32 or i64).
struct Ragged {
  int64_t total = 0;
  DType offsets_dtype = DType::i32;
};

// Keys and values in pages of `page_size` rows: K [num_pages, page_size, h_kv, d_qk], V alike;
// a device block_table [b, max_pages] i32 names the pages of each batch.
struct Paged {
  int64_t page_size = 0;
  int64_t num_pages = 0;
  int64_t max_pages = 0;
};

class Problem {
 public:
  // Declares q, k, v, o (forward) or q, k, v, o, do, stats, dq, dk, dv (backward), packed.
  static Problem forward(const Shape& shape, DType dtype);
  static Problem backward(const Shape& shape, DType dtype);

  // Replaces the description of a tensor (dtype, dims, strides). Declares it if it was not.
  Problem& set_tensor(TensorId id, const TensorDesc& desc);
  // Sets the element strides of a declared tensor, in logical order.
  Problem& set_strides(TensorId id, std::initializer_list<int64_t> strides);

  // Forward: also write stats (LSE, f32 [B, Hq, Sq]). Backward always reads stats.
  Problem& set_stats(bool on = true);
  // Additive bias [b_dim, h_dim, Sq, Skv] with b_dim in {1, B} and h_dim in {1, Hq}.
  // Backward also declares dbias in the same shape; set_bias_grad(false) drops it.
  Problem& set_bias(int64_t b_dim, int64_t h_dim);
  Problem& set_bias_grad(bool on);
  // Per-head sink logit (f32 [Hq]); backward also declares dsink.
  Problem& set_sink(bool on = true);
  // Actual lengths per batch from device arrays (i32 [B]), read at execute (P6).
  Problem& set_seq_len_q(bool on = true);
  Problem& set_seq_len_kv(bool on = true);

  // Ragged query side (DESIGN 2.1): q, o, do, dq become [total_q, Hq, D], stats [total_q, Hq],
  // and offsets_q [B + 1] is declared. With seq_len_q, it gives the valid length inside each
  // padded slot. Call before set_strides: redeclaring a tensor packs it again.
  Problem& set_ragged_q(int64_t total_q, DType offsets_dtype = DType::i32);
  Problem& set_ragged_kv(int64_t total_kv, DType offsets_dtype = DType::i32);
  // Paged keys and values (DESIGN 2.2, forward only): k, v become [num_pages, page_size, Hkv,
  // D], block_table [B, max_pages] and seq_len_kv are declared. max_pages 0 means
  // ceil(s_kv / page_size), the table width the envelope needs.
  Problem& set_paged_kv(int64_t page_size, int64_t num_pages, int64_t max_pages = 0);
  Problem& clear_ragged_q();
  Problem& clear_ragged_kv();
  Problem& clear_paged_kv();

  Problem& set_scale(double scale);  // default 1/sqrt(d_qk)
  Problem& set_softcap(double cap);  // s = cap * tanh(s / cap)
  Problem& set_mask(const Mask& mask);
  Problem& set_causal(MaskAlign align = MaskAlign::top_left);
  Problem& set_window(std::optional<int64_t> left, std::optional<int64_t> right,
                      MaskAlign align = MaskAlign::top_left);
  Problem& set_deterministic(bool on = true);
  // Batch-invariant split-KV (DESIGN 2.3): an engine that splits a sequence's keys across CTAs
  // splits them at the positions 0, n, 2n, ... only, whatever the batch shape, so that a row's
  // result depends on its own sequence alone. Engines that never split ignore it. nullopt: the
  // engine picks splits from the envelope and the device lengths.
  Problem& set_split_tokens(std::optional<int64_t> n);

  Direction direction() const { return direction_; }
  DType dtype() const { return dtype_; }
  const std::optional<TensorDesc>& tensor(TensorId id) const { return tensors_[index_of(id)]; }
  bool has(TensorId id) const { return tensor(id).has_value(); }
  const std::optional<double>& scale() const { return scale_; }
  const std::optional<double>& softcap() const { return softcap_; }
  const Mask& mask() const { return mask_; }
  bool deterministic() const { return deterministic_; }
  const std::optional<int64_t>& split_tokens() const { return split_tokens_; }
  // The shape given at construction: the envelope of a ragged or paged problem.
  const Shape& shape() const { return shape_; }
  const std::optional<Ragged>& ragged_q() const { return ragged_q_; }
  const std::optional<Ragged>& ragged_kv() const { return ragged_kv_; }
  const std::optional<Paged>& paged_kv() const { return paged_kv_; }
  // A misuse of a setter (strides for an undeclared tensor, ...), reported by validation.
  const std::string& setter_error() const { return setter_error_; }

 private:
  Problem(Direction direction, const Shape& shape, DType dtype);
  void declare(TensorId id, DType dtype, std::initializer_list<int64_t> dims);
  // (Re)declares, packed, every operand tensor the direction and options imply in the layout
  // the ragged/paged options give, keeping optional tensors only when already declared.
  void declare_layout();
  void declare_stats();

  Direction direction_ = Direction::forward;
  DType dtype_ = DType::bf16;
  Shape shape_;
  std::array<std::optional<TensorDesc>, kTensorCount> tensors_;
  std::optional<double> scale_;
  std::optional<double> softcap_;
  Mask mask_;
  bool deterministic_ = false;
  std::optional<int64_t> split_tokens_;
  std::optional<Ragged> ragged_q_;
  std::optional<Ragged> ragged_kv_;
  std::optional<Paged> paged_kv_;
  std::string setter_error_;
};

}  // namespace floe
