// What both directions of the sm90 engine require at plan time: the target (sm_90 with a TMA
// encoder), operands TMA can address, and row tensors it reads or writes 16 bytes at a time.
// Each returns an empty string, or why not, naming the tensor.
#pragma once

#include <cstdint>
#include <string>

#include "engines/facts.h"
#include "engines/kernel_launch.h"
#include "engines/sm90/tma_descriptor.h"
#include "floe/plan.h"

namespace floe::detail::sm90 {

inline constexpr int64_t kInt32Max = INT32_MAX;

// A bias the forward's TMA can stage (kernels see it as fwd_params.h's tensor map): a unit
// innermost stride; a row stride and the strides of the batch and head dims it does not broadcast
// positive multiples of 8 elements (16 bytes) below 2^39; a broadcast dim has size 1 or stride 0.
// `id`: the bias, or the backward's dBias (in the bias's shape), by the same rules.
std::string check_tma_bias(const Facts& f, TensorId id = TensorId::bias);

// The bias's tensor map (box_rows query rows a box), without its base; *b_step and *h_step (0 or
// 1) turn the tile's batch and head into the map's coordinates (0 where broadcast). `id`: the
// bias, or dBias.
TmaMatrix tma_bias(const Facts& f, int box_rows, int32_t* b_step, int32_t* h_step,
                   TensorId id = TensorId::bias);

// A positive scale and no empty dimension: what every sm90 kernel assumes.
std::string check_scale_and_sizes(const Facts& f);

std::string tensor_name(TensorId id);
// A plan-time switch read from the environment (the A/B knobs and the opt-ins of held-back
// kernels): *value is 0 or 1, or -1 where the variable is unset or empty; anything else is the
// reason, naming the variable and its value.
std::string read_switch(const char* name, int* value);
std::string check_target(const Target& target);

// Whether `id` is on a ragged (packed) side of the problem: [T, h, d] (stats [T, h]).
bool ragged_operand(const Facts& f, TensorId id);

// A unit innermost stride, outer strides positive multiples of 8 elements (16 bytes) below
// 2^39 (the base's 16-byte alignment is pointer_alignment's). Dense [b, h, s, d] or ragged
// [T, h, d].
std::string check_tma_operand(const Facts& f, TensorId id);
// A tensor read or written a row at a time with 16-byte (or 4-byte) accesses: a unit innermost
// stride, outer strides multiples of 8 elements.
std::string check_row_tensor(const Facts& f, TensorId id);

// The [b, h, s, d] view that TMA loads of a Q-, K-, V- or dO-shaped tensor (box_rows rows a
// copy), without its base, which launch() fills in; a ragged side's [T, h, d] as [1, h, T, d]; a
// paged cache's [pages, P, h, d] as [pages, h, P, d] in boxes of one 64-column chunk (box_rows
// within one page).
TmaTensor tma_tensor(const Facts& f, TensorId id, int box_rows);

}  // namespace floe::detail::sm90
