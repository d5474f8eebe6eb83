// Where a plan runs: the CPU, or one CUDA device whose properties are read once, at build.
#pragma once

#include <cstddef>

#include "floe/status.h"

namespace floe {

struct Target {
  enum class Kind : unsigned char { cpu, cuda };

  Kind kind = Kind::cpu;
  bool executable = true;  // false: planned for an architecture with no device present
  int device = -1;         // CUDA ordinal
  int arch = 0;            // compute capability as 10*major + minor: 80, 86, 89, 90
  int sm_count = 0;
  size_t smem_per_block_optin = 0;  // bytes a block may opt into
  int cpu_threads = 1;              // CPU: worker threads of the reference engine

  // The host. threads = 0 takes the hardware concurrency.
  static Target cpu(int threads = 0);
  // A CUDA device (-1: the current one); fails where there is none.
  static Result<Target> cuda(int device = -1);
  // An architecture without a device: for routing and explain(); such plans cannot execute.
  // Properties not given take the values of the reference part (A100 for 80, H100/H200 for 90).
  static Target cuda_arch(int arch);
};

// True when at least one CUDA device is usable (no error on cudaGetDeviceCount).
bool cuda_available();

}  // namespace floe
