#include "guarded_block.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace floe::tool {

namespace {

Status cuda_error(const std::string& what, const char* call, cudaError_t err) {
  cudaGetLastError();  // reset a non-sticky error so that later calls start clean
  return Status(Code::device_error, what + ": " + call + " failed: " + cudaGetErrorString(err));
}

std::string hex_byte(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", b);
  return buf;
}

}  // namespace

const char* to_string(Memory memory) {
  return memory == Memory::host ? "host" : "device";
}

Result<GuardedBlock> GuardedBlock::create(size_t payload_bytes, Memory memory,
                                          const std::string& what) {
  GuardedBlock b;
  b.memory_ = memory;
  b.payload_bytes_ = payload_bytes;
  b.what_ = what;
  const size_t rounded = (payload_bytes + kAlignment - 1) / kAlignment * kAlignment;
  b.total_bytes_ = kCanaryBytes + rounded + kCanaryBytes;
  if (memory == Memory::host) {
    void* p = std::aligned_alloc(kAlignment, b.total_bytes_);
    if (p == nullptr) {
      return Status(Code::internal, what + ": cannot allocate " + std::to_string(b.total_bytes_) +
                                        " bytes of host memory");
    }
    b.base_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
    std::memset(p, kCanaryByte, b.total_bytes_);
  } else {
    void* p = nullptr;
    if (cudaError_t err = cudaMalloc(&p, b.total_bytes_); err != cudaSuccess) {
      return cuda_error(what + " (" + std::to_string(b.total_bytes_) + " bytes)", "cudaMalloc",
                        err);
    }
    b.base_ = std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
    if (cudaError_t err = cudaMemset(p, kCanaryByte, b.total_bytes_); err != cudaSuccess) {
      return cuda_error(what, "cudaMemset", err);
    }
    if (cudaError_t err = cudaDeviceSynchronize(); err != cudaSuccess) {
      return cuda_error(what, "cudaDeviceSynchronize", err);
    }
  }
  return b;
}

Status GuardedBlock::write_all(const unsigned char* src) const {
  if (!base_) return Status(Code::internal, what_ + ": block not allocated");
  if (memory_ == Memory::host) {
    std::memcpy(base_.get(), src, total_bytes_);
    return Status();
  }
  if (cudaError_t err = cudaMemcpy(base_.get(), src, total_bytes_, cudaMemcpyHostToDevice);
      err != cudaSuccess) {
    return cuda_error(what_, "cudaMemcpy (upload)", err);
  }
  return Status();
}

Status GuardedBlock::read_all(unsigned char* dst) const {
  if (!base_) return Status(Code::internal, what_ + ": block not allocated");
  if (memory_ == Memory::host) {
    std::memcpy(dst, base_.get(), total_bytes_);
    return Status();
  }
  if (cudaError_t err = cudaMemcpy(dst, base_.get(), total_bytes_, cudaMemcpyDeviceToHost);
      err != cudaSuccess) {
    return cuda_error(what_, "cudaMemcpy (download)", err);
  }
  return Status();
}

Status GuardedBlock::fill_payload(unsigned char byte) const {
  if (!base_) return Status(Code::internal, what_ + ": block not allocated");
  if (memory_ == Memory::host) {
    std::memset(payload(), byte, payload_bytes_);
    return Status();
  }
  if (cudaError_t err = cudaMemset(payload(), byte, payload_bytes_); err != cudaSuccess) {
    return cuda_error(what_, "cudaMemset", err);
  }
  if (cudaError_t err = cudaDeviceSynchronize(); err != cudaSuccess) {
    return cuda_error(what_, "cudaDeviceSynchronize", err);
  }
  return Status();
}

Status GuardedBlock::check_canaries(const unsigned char* image) const {
  const size_t after = kCanaryBytes + payload_bytes_;
  size_t damaged = 0;
  size_t first = total_bytes_;
  for (size_t i = 0; i < total_bytes_; ++i) {
    if (i == kCanaryBytes) i = after;  // skip the payload
    if (i >= total_bytes_) break;
    if (image[i] != kCanaryByte) {
      if (damaged++ == 0) first = i;
    }
  }
  if (damaged == 0) return Status();
  const long long offset = static_cast<long long>(first) - static_cast<long long>(kCanaryBytes);
  std::string msg = what_ + ": canary damaged at byte offset " + std::to_string(offset) +
                    (first < kCanaryBytes ? " (before the buffer)"
                                          : " (after the buffer, which ends at " +
                                                std::to_string(payload_bytes_) + ")") +
                    ": " + hex_byte(image[first]) + ", expected " + hex_byte(kCanaryByte);
  if (damaged > 1) msg += " (" + std::to_string(damaged) + " canary bytes damaged in all)";
  return Status(Code::internal, msg);
}

Status GuardedBlock::check_canaries() const {
  if (!base_) return Status();
  std::vector<unsigned char> image(total_bytes_);
  if (Status st = read_all(image.data()); !st) return st;
  return check_canaries(image.data());
}

}  // namespace floe::tool
