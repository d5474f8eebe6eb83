// Facts: what a validated problem needs, flattened once so engines ask simple questions.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "floe/problem.h"

namespace floe::detail {

struct Facts {
  Direction direction = Direction::forward;
  DType dtype = DType::bf16;
  int64_t b = 0, h_q = 0, h_kv = 0, s_q = 0, s_kv = 0, d_qk = 0, d_v = 0;
  int64_t group = 1;  // h_q / h_kv: query heads per key/value head

  // DESIGN 2.1, 2.2: b, s_q and s_kv above are then the envelope. Engines that serve only the
  // dense layout decline with serving_decline_reason().
  bool ragged_q = false, ragged_kv = false, paged_kv = false;
  int64_t total_q = 0, total_kv = 0;                    // packed tokens at plan time
  int64_t page_size = 0, num_pages = 0, max_pages = 0;  // paged_kv

  std::array<TensorDesc, kTensorCount> tensor{};
  std::array<bool, kTensorCount> declared{};

  double scale = 0;  // resolved: the default is 1/sqrt(d_qk)
  bool has_softcap = false;
  double softcap = 0;
  Mask mask;
  bool deterministic = false;
  int64_t split_tokens = 0;  // > 0: batch-invariant split-KV at multiples of this many keys

  bool has(TensorId id) const { return declared[index_of(id)]; }
  const TensorDesc& t(TensorId id) const { return tensor[index_of(id)]; }
  bool backward() const { return direction == Direction::backward; }
  // Bias broadcast: true when the bias has size 1 in that dim while the problem does not.
  bool bias_broadcast_b() const { return has(TensorId::bias) && t(TensorId::bias).dims[0] == 1; }
  bool bias_broadcast_h() const { return has(TensorId::bias) && t(TensorId::bias).dims[1] == 1; }
  bool serving() const { return ragged_q || ragged_kv || paged_kv; }
};

// For an engine that serves only dense problems: why it declines a ragged or paged one, naming
// the option (empty for a dense problem).
std::string serving_decline_reason(const Facts& facts, const char* engine);

// Only for problems that passed validate().
Facts make_facts(const Problem& problem);

// The batch, head and length sizes every engine's Params carry (each in its own integer type):
// one reading of the Facts for all of them.
template <class Params>
void fill_sizes(const Facts& f, Params& p) {
  using Int = decltype(p.b);
  p.b = static_cast<Int>(f.b);
  p.h_q = static_cast<Int>(f.h_q);
  p.h_kv = static_cast<Int>(f.h_kv);
  p.group = static_cast<Int>(f.group);
  p.s_q = static_cast<Int>(f.s_q);
  p.s_kv = static_cast<Int>(f.s_kv);
}

}  // namespace floe::detail
