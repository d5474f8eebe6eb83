#include "engines/engine.h"

namespace floe::detail {

// By default a tensor's base need only be aligned to its element.
size_t LaunchPlan::pointer_alignment(TensorId id, const Facts& facts) const {
  return size_of(facts.t(id).dtype);
}

}  // namespace floe::detail
