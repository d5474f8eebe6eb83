// reference: the CPU engine. fp64 arithmetic, any strides, every feature; the yardstick
// every other engine is tested against (P5 on the host).
#pragma once

#include "engines/engine.h"

namespace floe::detail {

const Engine& reference_engine();

}  // namespace floe::detail
