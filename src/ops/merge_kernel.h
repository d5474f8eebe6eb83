// The merge op's CUDA launcher: plain C++ declarations, defined in merge_kernel.cu.
#pragma once

#include <cstdint>

#include "floe/merge.h"
#include "floe/status.h"

namespace floe::detail::merge {

struct TensorArg {
  void* ptr = nullptr;
  int64_t s[4] = {0, 0, 0, 0};
  DType dtype = DType::f32;
};

struct Params {
  TensorArg t[kMergeTensorCount];
  int64_t b = 0, h = 0, s = 0, d = 0;
};

// Loads the kernel (at build: lazily at execute, loading would wait for the device, P2).
Status load_kernel();
// One warp a row; launches on `stream` and nothing else.
Status launch(const Params& p, CUstream_st* stream);

}  // namespace floe::detail::merge
