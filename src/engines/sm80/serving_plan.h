// sm80 planning of ragged (packed) sides and paged K/V caches (DESIGN 2.1, 2.2), both
// directions: the rules such tensors must meet and their strides as the kernels' [b, h, s]
// (kernels::ServingRows itself is filled by engines/serving_sides.h). Host code.
#pragma once

#include <initializer_list>
#include <string>

#include "engines/facts.h"
#include "engines/serving_sides.h"  // make_serving_rows, set_serving_pointers: the callers' too
#include "engines/tensor_core_rules.h"
#include "kernels/strides.h"

namespace floe::detail::sm80 {

// The dense check_operands, with the ragged and paged tensors checked in their own layouts:
// unit innermost stride, 16-byte rows, and `block_rows` rows (of tokens, or of a page)
// addressable with 32-bit offsets. Empty, or the first reason.
std::string check_serving_operands(const Facts& f, std::initializer_list<TensorId> query_side,
                                   int block_m, std::initializer_list<TensorId> key_side,
                                   int block_n, std::initializer_list<TensorId> biases);

// A tensor's [b, h, s] strides: a ragged side's {0, head, token}, paged K/V's {0, head, row in
// the page}, else the dense strides (zeros when it is not declared).
kernels::Strides3 serving_strides_of(const Facts& f, TensorId id);

// The strides of the operands a forward and a backward share (q, k, v, o, stats, bias).
template <class Params>
void fill_forward_strides(const Facts& f, Params& p) {
  p.q_strides = serving_strides_of(f, TensorId::q);
  p.k_strides = serving_strides_of(f, TensorId::k);
  p.v_strides = serving_strides_of(f, TensorId::v);
  p.o_strides = serving_strides_of(f, TensorId::o);
  p.stats_strides = serving_strides_of(f, TensorId::stats);
  p.bias_strides = tensor_core::bias_strides_of(f, TensorId::bias);
}

}  // namespace floe::detail::sm80
