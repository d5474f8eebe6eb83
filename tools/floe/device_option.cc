#include "floe/target.h"

#include "commands.h"

namespace floe::tool {

void add_device_option(CLI::App& command, std::string& device) {
  // Asked only when the flag is absent, so `--device cpu` never touches the CUDA runtime.
  command
      .add_option("--device", device,
                  "where to run: cpu or cuda (default: cuda if a device is usable)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
}

Memory memory_of(const std::string& device) {
  if (device.empty()) return cuda_available() ? Memory::device : Memory::host;
  return device == "cuda" ? Memory::device : Memory::host;
}

}  // namespace floe::tool
