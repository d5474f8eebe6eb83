// The workspace contract (P3): named chunks at 256-byte-aligned offsets fixed at build;
// execute carves them by name from the caller's buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/checked_size.h"
#include "floe/plan.h"

namespace floe::detail {

class WorkspaceLayout {
 public:
  // Appends a chunk; a size of 0 is recorded but takes no room. Names must be unique.
  void add(const std::string& name, size_t bytes);
  size_t total_bytes() const { return total_; }
  // True when the sizes added do not fit 64 bits (or leave no room for any pointer offset);
  // such a plan is refused.
  bool overflowed() const { return total_ > static_cast<size_t>(INT64_MAX); }
  const std::vector<WorkspaceChunk>& chunks() const { return chunks_; }

 private:
  std::vector<WorkspaceChunk> chunks_;
  size_t total_ = 0;
};

class Workspace {
 public:
  Workspace(void* base, const std::vector<WorkspaceChunk>& chunks)
      : base_(base), chunks_(&chunks) {}

  // The chunk's start, or nullptr when the plan has no chunk of that name. No allocation.
  template <class T = void>
  T* carve(const char* name) const {
    for (const WorkspaceChunk& c : *chunks_) {
      if (std::strcmp(c.name.c_str(), name) == 0) {
        return reinterpret_cast<T*>(static_cast<char*>(base_) + c.offset);
      }
    }
    return nullptr;
  }
  size_t bytes_of(const char* name) const {
    for (const WorkspaceChunk& c : *chunks_) {
      if (std::strcmp(c.name.c_str(), name) == 0) return c.bytes;
    }
    return 0;
  }

 private:
  void* base_;
  const std::vector<WorkspaceChunk>* chunks_;
};

}  // namespace floe::detail
