// generic: the CUDA engine that serves every valid problem on a GPU (P5). fp32 arithmetic,
// any strides and head dims; simple and obviously right.
#pragma once

#include "engines/engine.h"

namespace floe::detail {

const Engine& generic_engine();

}  // namespace floe::detail
