// The subcommands of the floe command line. Each registers itself on the CLI11 app and
// leaves its exit status in `exit_code` when it runs; main.cc only dispatches.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "guarded_block.h"

namespace floe::tool {

// floe run CASE... [--engine auto|NAME] [--device cpu|cuda]
void add_run_command(CLI::App& app, int& exit_code);
// floe explain CASE [--arch sm_XX] [--device cpu|cuda]
void add_explain_command(CLI::App& app, int& exit_code);
// floe demo [--device cpu|cuda] [--b --h-q --h-kv --s --d]
void add_demo_command(CLI::App& app, int& exit_code);
// floe bench [--sweep standard|quick] [--direction fwd|bwd|both] [--engine auto|NAME...]
//            [--json OUT] [problem options]
void add_bench_command(CLI::App& app, int& exit_code);

// Shared by the commands: the --device flag, defaulting to cuda where a device is usable.
void add_device_option(CLI::App& command, std::string& device);
Memory memory_of(const std::string& device);

}  // namespace floe::tool
