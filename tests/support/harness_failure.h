// What a failing GPU case leaves behind: a case folder that `floe run` reproduces, the
// outputs of both sides, and the command to type.
#pragma once

#include <string>

#include "case_folder.h"

namespace floe::test {

// Writes DIR/NAME/{problem.json, inputs .npy} (write_case), failure.txt with `message`, and,
// where given, DIR/NAME/got/ (the engine's outputs) and DIR/NAME/expected/ (the reference's).
// Returns the command that reproduces the case with `engine` on the GPU, or a line saying
// why the folder could not be written.
std::string write_failure(const std::string& dir, const std::string& name, const tool::Case& c,
                          const std::string& engine, const std::string& message,
                          const tool::ArrayMap* got = nullptr,
                          const tool::ArrayMap* want = nullptr);

// `floe run --device cuda --engine ENGINE CASE_DIR` with the path of the CLI built beside the
// tests.
std::string reproduce_command(const std::string& engine, const std::string& case_dir);

}  // namespace floe::test
