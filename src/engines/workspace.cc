#include "engines/workspace.h"

#include <stdexcept>

namespace floe::detail {

void WorkspaceLayout::add(const std::string& name, size_t bytes) {
  for (const WorkspaceChunk& c : chunks_) {
    if (c.name == name) throw std::logic_error("workspace chunk '" + name + "' added twice");
  }
  // Saturating: an engine's size product that overflowed arrives as kSizeSaturated and keeps
  // the total saturated, which Plan::build refuses (overflowed()).
  const size_t padded = saturating_add(bytes, kWorkspaceAlignment - 1);
  const size_t rounded = padded == kSizeSaturated
                             ? kSizeSaturated
                             : padded / kWorkspaceAlignment * kWorkspaceAlignment;
  chunks_.push_back(WorkspaceChunk{name, total_, bytes});
  total_ = saturating_add(total_, rounded);
}

}  // namespace floe::detail
