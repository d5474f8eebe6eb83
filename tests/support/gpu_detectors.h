// Detectors for P2 (execute is a zero-surprise hot path): around a call, what did it allocate
// and where did it synchronise?
//
//   AllocationDetector alloc;   // armed from construction
//   SyncDetector sync;
//   Status st = plan.execute(args, ws, ws_size, stream);
//   Detection a = alloc.finish(), s = sync.finish();
//   EXPECT_TRUE(a.empty()) << a.describe();
//
// Device, pinned, managed and pool allocations (and frees, and stream/event creation) and
// synchronising calls are seen through CUPTI's callback API, subscribed to both the runtime
// and the driver domains, so calls made by any thread, through cudart or straight through
// the driver (cuGetProcAddress included), are caught. CUPTI is loaded with dlopen at first
// use: the support library needs no link to it, only its header at build time. Host heap
// allocations are counted by the test binary's own global operator new/delete
// (gpu_host_heap.h), on the thread that armed the detector.
#pragma once

#include <string>
#include <vector>

#include "floe/status.h"

namespace floe::test {

// The calls a detector saw, by API name without version suffixes ("cudaMalloc",
// "cuMemAlloc", "cudaStreamSynchronize", "operator new"), in order.
struct Detection {
  std::vector<std::string> calls;

  bool empty() const { return calls.empty(); }
  bool contains(const std::string& api) const;
  // "none", or the names with repeat counts: "cudaMalloc, cuMemAlloc x2".
  std::string describe() const;
};

// Ok when CUPTI is loaded and subscribed; else why not (library not found, header missing at
// build, another CUPTI client such as a profiler or compute-sanitizer already attached).
Status detectors_available();

// What CUPTI call names the detectors classify as what; exposed for the tests of the tables.
bool is_allocation_api(const std::string& name);
bool is_sync_api(const std::string& name);
// "cudaMemcpy_v3020" -> "cudaMemcpy", "cuMemAlloc_v2" -> "cuMemAlloc",
// "cudaStreamSynchronize_ptsz" -> "cudaStreamSynchronize".
std::string normalize_api_name(const std::string& name);

// Allocations of device, pinned, managed or pool memory, frees, stream or event creation
// (runtime or driver, any thread), and operator new/delete on this thread, between
// construction and finish(). Requires detectors_available(); otherwise finish() reports the
// reason as a call named "detector unavailable: ...", so that a test cannot pass blind.
class AllocationDetector {
 public:
  AllocationDetector();
  ~AllocationDetector();
  AllocationDetector(const AllocationDetector&) = delete;
  AllocationDetector& operator=(const AllocationDetector&) = delete;

  Detection finish();

 private:
  unsigned start_ = 0;
  bool armed_ = false;
};

// Synchronising or blocking calls: device/stream/event/context synchronise, stream and event
// queries, non-async memcpy and memset, frees (which synchronise), runtime or driver, any
// thread, between construction and finish().
class SyncDetector {
 public:
  SyncDetector();
  ~SyncDetector();
  SyncDetector(const SyncDetector&) = delete;
  SyncDetector& operator=(const SyncDetector&) = delete;

  Detection finish();

 private:
  unsigned start_ = 0;
  bool armed_ = false;
};

}  // namespace floe::test
