// The tensors of one problem laid out in memory exactly as declared: every tensor at its
// declared strides, the gaps between addressed elements poisoned (NaN for floating types),
// and a canary band before and after each buffer. After a run, check_guards() proves that
// nothing was written outside the addressed elements of the outputs.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "floe/arguments.h"
#include "floe/problem.h"
#include "floe/status.h"
#include "npy.h"

namespace floe::tool {

enum class Memory { host, device };

class TensorBuffers {
 public:
  static constexpr size_t kCanaryBytes = 256;

  // Allocates every tensor the problem declares (cudaMalloc for device memory).
  static Result<TensorBuffers> create(const Problem& problem, Memory memory);

  // Stores a logical float32 array into tensor `id`, rounded to its dtype (i32: exact ints).
  // The shape must equal the tensor's dims.
  Status upload(TensorId id, const HostArray& array);
  // Writes NaN (f32/f16/bf16) or 0x7fffffff (i32) into every addressed element of every
  // output of the problem's direction, so that an element a run forgets to write shows up.
  Status poison_outputs();
  // The tensor's base pointers, for Plan::execute.
  Arguments arguments() const;
  // A tensor as a logical float32 array.
  Result<HostArray> download(TensorId id) const;
  // Canaries intact and stride gaps still poisoned, for every tensor; the error names the
  // tensor and the byte offset of the first damage.
  Status check_guards() const;

  Memory memory() const;
  const Problem& problem() const;

  // Opaque: the buffers free their memory when the last copy goes.
  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace floe::tool
