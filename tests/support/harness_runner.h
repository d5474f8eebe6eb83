// Running one case the way tool::run_case does, split into steps so that a test can choose
// the target, the stream, the workspace and the moment: lay the inputs out as declared
// (poisoned gaps, canaries), poison the outputs, execute (perhaps many times, perhaps while
// capturing a graph), then wait, check the guards and read the outputs back.
#pragma once

#include <memory>
#include <string>

#include "buffers.h"
#include "case_folder.h"
#include "floe/floe.h"
#include "guarded_block.h"

namespace floe::test {

// A plan on the CPU (`cpu_threads` reference threads; 1 lets callers run cases in parallel)
// for Memory::host, or on the current CUDA device for Memory::device.
Result<Plan> build_plan(const Problem& problem, tool::Memory memory, const std::string& engine,
                        int cpu_threads = 1);

// True when an engine pinned by FLOE_ENGINE declined the problem: such a problem is not that
// engine's to serve, so tests pass over it (and fail only if it declines every problem).
// Under "auto" a refusal is always a failure: some engine must serve every valid problem.
bool declined_by_pinned_engine(const Status& status);
template <class T>
bool declined_by_pinned_engine(const Result<T>& r) {
  return !r.ok() && declined_by_pinned_engine(r.status());
}

class PreparedRun {
 public:
  // Lays the case's inputs out as plan.problem() declares and poisons every output. The
  // workspace has exactly plan.workspace_bytes(), canaries around it, 0xff bytes inside (an
  // engine that relies on zeroed memory fails).
  static Result<PreparedRun> create(const tool::Case& c, const Plan& plan, tool::Memory memory);

  const Plan& plan() const { return plan_; }
  tool::TensorBuffers& buffers() { return buffers_; }
  const tool::TensorBuffers& buffers() const { return buffers_; }
  Arguments arguments() const { return buffers_.arguments(); }
  void* workspace() const { return workspace_.payload(); }
  size_t workspace_size() const { return plan_.workspace_bytes(); }

  // plan.execute with this run's buffers and workspace. Returns at once on the device.
  Status execute(Stream stream = nullptr) const;
  // NaN again in every output element, so that the next execute must write each of them.
  // Returns once the device holds the NaN (as scramble_workspace): an upload from pageable memory
  // or a memset may still be in flight when the call returns, on the legacy default stream, and
  // an execute on a non-blocking stream is not ordered after it (a fast kernel's output was
  // overwritten by a late poison on the H200).
  Status poison();
  // Fills the workspace with `byte`: a correct engine never depends on what it held.
  Status scramble_workspace(unsigned char byte) const;
  // Waits for the device (every stream), checks canaries (workspace included) and gaps, reads
  // every output back.
  Result<tool::ArrayMap> finish() const;

 private:
  Plan plan_;
  tool::TensorBuffers buffers_;
  tool::GuardedBlock workspace_;
};

// One execute of the case on `memory` with `engine` ("auto" or a name): the outputs by case
// name, after the guards were checked.
Result<tool::ArrayMap> run_once(const tool::Case& c, tool::Memory memory,
                                const std::string& engine);

// The reference engine on the host, one thread: the yardstick.
Result<tool::ArrayMap> run_reference(const tool::Case& c);

// Waits for the device and turns any pending CUDA error into a Status naming `what`.
Status device_sync(const char* what);

}  // namespace floe::test
