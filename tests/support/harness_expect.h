// The check every GPU test ends with: an engine's outputs against the reference engine's on
// the same rounded inputs, with a reproducing case folder written on failure.
#pragma once

#include <string>

#include "case_folder.h"

namespace floe::test {

// Runs the reference on `c` and compares `got` with it (tolerances of harness_tolerance.h).
// A mismatch fails the current test with the summary and the `floe run` command that
// reproduces it (the case lands under the harness's failure dir as `name`).
void expect_matches_reference(const std::string& name, const tool::Case& c,
                              const tool::ArrayMap& got);

}  // namespace floe::test
