#include "support/cli_process.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>

namespace floe::test {

CliRun run_cli(const std::string& binary, const std::string& args) {
  CliRun r;
  const std::string cmd = binary + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace floe::test
