// Runs the built `floe` binary the way a person would, for the command-line tests.
#pragma once

#include <string>

namespace floe::test {

struct CliRun {
  int code = -1;    // exit status, -1 when it did not exit normally
  std::string out;  // stdout and stderr together
};

CliRun run_cli(const std::string& binary, const std::string& args);

}  // namespace floe::test
