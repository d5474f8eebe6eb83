// floe: the command line (DESIGN §4). A thin dispatcher; each command lives in its own file.
#include <cstdio>
#include <exception>
#include <new>

#include <CLI/CLI.hpp>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"floe: fused scaled-dot-product attention, forward and backward"};
  app.require_subcommand(1, 1);
  int exit_code = 0;
  floe::tool::add_run_command(app, exit_code);
  floe::tool::add_explain_command(app, exit_code);
  floe::tool::add_demo_command(app, exit_code);
  floe::tool::add_bench_command(app, exit_code);
  // No input may abort floe: whatever escapes a command is a message and an exit code (3:
  // floe's own failure, where 1 is the case's and 2 the command line's).
  try {
    CLI11_PARSE(app, argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "floe: out of memory\n");
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "floe: internal error: %s\n", e.what());
    return 3;
  }
  return exit_code;
}
