// sm90: the fused attention engine on Hopper tensor cores (wgmma, TMA, warp specialisation), for
// sm_90 only. Forward only for now, and only what it does natively (README.md: f16/bf16, head
// dims 64/128/256 with d_qk = d_v, TMA-addressable strides, GQA, band masks, padding, stats);
// it declines everything else, naming the tensor or feature, so sm80 serves it.
#pragma once

#include "engines/engine.h"

namespace floe::detail {

const Engine& sm90_engine();

}  // namespace floe::detail
