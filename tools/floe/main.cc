// floe: the command line (DESIGN §4). A thin dispatcher; each command lives in its own file.
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
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
