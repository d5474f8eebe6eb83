// The device pointers of one execute, one per declared tensor, indexed by TensorId.
#pragma once

#include <array>

#include "floe/tensor.h"

namespace floe {

struct Arguments {
  std::array<void*, kTensorCount> ptr{};

  Arguments& set(TensorId id, const void* p) {
    ptr[index_of(id)] = const_cast<void*>(p);
    return *this;
  }
  void* get(TensorId id) const { return ptr[index_of(id)]; }
};

}  // namespace floe
