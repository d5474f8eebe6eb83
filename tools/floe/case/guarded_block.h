// One raw allocation, on the host or the device, with a band of canary bytes before and
// after its payload. TensorBuffers builds every tensor on one; run_case uses one for the
// workspace. Device memory is only touched by the calls here (cudaMalloc, cudaMemcpy,
// cudaFree), never by anything that runs inside Plan::execute.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "floe/status.h"

namespace floe::tool {

enum class Memory { host, device };

const char* to_string(Memory memory);

class GuardedBlock {
 public:
  static constexpr size_t kCanaryBytes = 256;
  // Alignment of the payload and granularity of the allocation: what cudaMalloc gives and
  // what floe asks of a workspace (kWorkspaceAlignment).
  static constexpr size_t kAlignment = 256;
  // The canary: not a plausible f16/bf16/f32 value a kernel would write (0xa5a5 is
  // -0.0227 in f16, -2.9e-16 in bf16), and not the NaN poison, so the two never mix up.
  static constexpr unsigned char kCanaryByte = 0xA5;

  // kCanaryBytes + payload_bytes rounded up to kAlignment + kCanaryBytes, every byte set to
  // kCanaryByte. `what` names the block in messages ("tensor 'q'", "workspace").
  static Result<GuardedBlock> create(size_t payload_bytes, Memory memory, const std::string& what);

  GuardedBlock() = default;

  Memory memory() const { return memory_; }
  size_t payload_bytes() const { return payload_bytes_; }
  size_t total_bytes() const { return total_bytes_; }
  // kAlignment-aligned; null for a block never created.
  void* payload() const {
    return base_ ? static_cast<unsigned char*>(base_.get()) + kCanaryBytes : nullptr;
  }

  // The whole allocation (canaries included), copied from or to host memory of total_bytes().
  Status write_all(const unsigned char* src) const;
  Status read_all(unsigned char* dst) const;
  // Fills the payload (not the canaries) with one byte.
  Status fill_payload(unsigned char byte) const;

  // The first canary byte that differs from kCanaryByte in an image of the whole allocation,
  // as an error naming `what` and the byte offset from the payload's start (negative: before).
  Status check_canaries(const unsigned char* image) const;
  // Reads the allocation back and checks its canaries.
  Status check_canaries() const;

 private:
  std::shared_ptr<void> base_;  // the allocation; its deleter frees host or device memory
  Memory memory_ = Memory::host;
  size_t payload_bytes_ = 0;
  size_t total_bytes_ = 0;
  std::string what_;
};

}  // namespace floe::tool
