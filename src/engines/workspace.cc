#include "engines/workspace.h"

#include <stdexcept>

namespace floe::detail {

void WorkspaceLayout::add(const std::string& name, size_t bytes) {
  for (const WorkspaceChunk& c : chunks_) {
    if (c.name == name) throw std::logic_error("workspace chunk '" + name + "' added twice");
  }
  const size_t rounded =
      (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
  chunks_.push_back(WorkspaceChunk{name, total_, bytes});
  total_ += rounded;
}

}  // namespace floe::detail
