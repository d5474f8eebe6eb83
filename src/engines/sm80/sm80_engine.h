// sm80: the fused attention engine on Ampere-class tensor cores (mma.sync m16n8k16, ldmatrix,
// cp.async), for every GPU from SM80 on. Forward only for now: one fused kernel per problem,
// every feature served natively (strides, GQA, band masks, padding, bias, sink, softcap, stats,
// Dqk != Dv), no workspace. Declines, naming the tensor and the rule, what it cannot serve.
#pragma once

#include "engines/engine.h"

namespace floe::detail {

const Engine& sm80_engine();

}  // namespace floe::detail
