// Comparing an engine's outputs with the reference's, element by element, with the
// tolerances of harness_tolerance.h; and bitwise, for determinism and graph replays.
#pragma once

#include <cstdint>
#include <string>

#include "case_folder.h"
#include "support/harness_tolerance.h"

namespace floe::test {

struct Comparison {
  int64_t checked = 0;  // elements compared
  int64_t failed = 0;   // elements out of tolerance (or NaN, or a missing output)
  double worst = 0;     // the largest |x - ref| / bound seen (1 = at the edge)
  std::string details;  // the first failures, one per line, with index, values and bound

  bool ok() const { return failed == 0 && checked > 0; }
  // "ok: N elements, worst 0.12 of tolerance" or the failure count and details.
  std::string summary() const;
};

// What the tolerances depend on, measured on the case's inputs (DType, Dqk, score bound, ...).
ToleranceInputs tolerance_inputs(const tool::Case& c);

// Every output of the case's problem: `got` (the engine's) against `want` (the reference's).
Comparison compare_outputs(const tool::Case& c, const tool::ArrayMap& got,
                           const tool::ArrayMap& want);

// Every element of every array of `want` has the same bits in `got`; NaN never passes (a NaN
// is an unwritten, poisoned element, the same in two runs that both forget it).
Comparison compare_bitwise(const tool::ArrayMap& got, const tool::ArrayMap& want);

}  // namespace floe::test
