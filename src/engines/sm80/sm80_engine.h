// sm80: the fused attention engine on Ampere-class tensor cores (mma.sync m16n8k16, ldmatrix,
// cp.async), built for sm_80 and sm_90a and run on sm_80 to sm_90. Forward and backward, every
// feature served natively (strides, GQA, band masks, padding, bias, sink, softcap, stats,
// Dqk != Dv, deterministic mode). The forward is one fused kernel with no workspace; the
// backward launches its kernels in stream order over named workspace chunks (README.md). Declines,
// naming the tensor and the rule, what it cannot serve.
#pragma once

#include "engines/engine.h"

namespace floe::detail {

const Engine& sm80_engine();

}  // namespace floe::detail
