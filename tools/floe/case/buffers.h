// The tensors of one problem laid out in memory exactly as declared: every tensor at its
// declared strides, the gaps between addressed elements poisoned (NaN for floating types),
// and a canary band before and after each buffer. After a run, check_guards() proves that
// nothing was written outside the addressed elements of the outputs.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "floe/arguments.h"
#include "floe/problem.h"
#include "floe/status.h"
#include "guarded_block.h"
#include "npy.h"

namespace floe::tool {

// Memory (host or device) is declared in guarded_block.h.

// The bytes from a tensor's first addressed element to its last, computed so that no
// product or sum wraps: refuses (Code::invalid_problem, naming the tensor) dims and strides
// whose span or element count does not fit in 64 bits. TensorDesc::span_bytes() wraps.
Status span_bytes_checked(TensorId id, const TensorDesc& d, size_t* bytes);

class TensorBuffers {
 public:
  static constexpr size_t kCanaryBytes = GuardedBlock::kCanaryBytes;
  static constexpr unsigned char kCanaryByte = GuardedBlock::kCanaryByte;

  // The poison written into stride gaps and, by poison_outputs(), into outputs: a quiet NaN
  // with a recognisable payload for f16 (0x7e5a), bf16 (0x7fda) and f32 (0x7fc05a5a);
  // 0x7fffffff for i32. Returned in the low bits, size_of(dtype) bytes wide.
  static uint32_t poison_bits(DType dtype);

  // Allocates every tensor the problem declares (cudaMalloc for device memory), one block
  // each: canaries around a span poisoned everywhere (gaps and addressed elements alike).
  // Refuses negative strides. Zero strides (broadcast views) are fine.
  static Result<TensorBuffers> create(const Problem& problem, Memory memory);

  // Stores a logical float32 array into tensor `id`, rounded to its dtype (i32: exact ints).
  // The shape must equal the tensor's dims. Where zero strides make several logical indices
  // address one element, their values must agree once rounded, or the upload is refused.
  Status upload(TensorId id, const HostArray& array);
  // Writes NaN (f32/f16/bf16) or 0x7fffffff (i32) into every addressed element of every
  // output of the problem's direction, so that an element a run forgets to write shows up.
  Status poison_outputs();
  // The tensor's base pointers, for Plan::execute.
  Arguments arguments() const;
  // A tensor as a logical float32 array.
  Result<HostArray> download(TensorId id) const;
  // Canaries intact, stride gaps still poisoned and inputs as uploaded (engines never write
  // them), for every tensor: reads every allocation back whole. The error (Code::internal)
  // names the tensor and the byte offset from its base of the first damage, per tensor.
  Status check_guards() const;

  Memory memory() const;
  const Problem& problem() const;

  // Opaque: the buffers free their memory when the last copy goes.
  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace floe::tool
