// The element strides of one operand's logical dims [b, h, s] (the innermost stride is 1 for the
// tensor-core engines; a broadcast dim has stride 0). One per operand in the params of every
// engine's forward and backward.
#pragma once

#include <cstdint>

namespace floe::kernels {

struct Strides3 {
  int64_t b = 0, h = 0, s = 0;
};

}  // namespace floe::kernels
