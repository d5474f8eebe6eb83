#include "engines/sm80/sm80_rules.h"

namespace floe::detail::sm80 {

std::string check_target(const Target& target) {
  if (target.kind != Target::Kind::cuda) return "runs on CUDA devices only";
  if (target.arch < 80) {
    return "needs sm_80 or newer (target is sm_" + std::to_string(target.arch) + ")";
  }
  if (target.arch >= 100) {
    return "its kernels are built for sm_80 and sm_90a; sm_" + std::to_string(target.arch) +
           " has no image of them";
  }
  return "";
}

}  // namespace floe::detail::sm80
