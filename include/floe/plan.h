// A Plan: everything decided once (validation, engine, launch geometry, workspace layout),
// then executed many times on the caller's stream with no allocation and no sync (P1-P3).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "floe/arguments.h"
#include "floe/problem.h"
#include "floe/status.h"
#include "floe/target.h"

struct CUstream_st;  // cudaStream_t without the CUDA headers

namespace floe {

using Stream = CUstream_st*;

inline constexpr size_t kWorkspaceAlignment = 256;

// One named region of the workspace, at an offset fixed at build.
struct WorkspaceChunk {
  std::string name;
  size_t offset = 0;
  size_t bytes = 0;
};

struct EngineVerdict {
  std::string engine;
  bool accepted = false;
  std::string reason;  // why it declined; empty when accepted
};

struct PlanOptions {
  std::string engine = "auto";  // or the name of one engine, which must accept
};

namespace detail {
struct PlanImpl;
}

class Plan {
 public:
  static Result<Plan> build(const Problem& problem, const Target& target,
                            const PlanOptions& options = {});

  Plan() = default;  // an empty plan; executes nothing

  const std::string& engine() const;
  size_t workspace_bytes() const;
  const std::vector<WorkspaceChunk>& workspace_chunks() const;
  // Every engine, ranked, with its verdict on this problem and target.
  const std::vector<EngineVerdict>& verdicts() const;
  // "engine: NAME" then one line per engine: "  NAME: accepted" or "  NAME: declined: why".
  std::string explain() const;
  const Problem& problem() const;
  const Target& target() const;

  // Checks arguments and workspace, then launches on stream. Any error comes back before any
  // launch, with no output byte written. workspace must be kWorkspaceAlignment-aligned and
  // hold workspace_bytes() (it may be null when that is 0). A CPU plan ignores stream.
  Status execute(const Arguments& args, void* workspace, size_t workspace_size,
                 Stream stream = nullptr) const;

 private:
  std::shared_ptr<const detail::PlanImpl> impl_;
};

// The names of every registered engine, fastest first.
std::vector<std::string> engine_names();

}  // namespace floe
