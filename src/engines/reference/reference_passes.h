// The reference engine's passes and the workspace they need. Every pass is a loop over
// independent items (rows), spread over the plan's threads; scratch is carved from the
// caller's workspace (P3), never allocated.
#pragma once

#include <cstdint>

#include "engines/reference/reference_operands.h"
#include "engines/workspace.h"

namespace floe::detail::reference {

// Workspace chunk names.
inline constexpr const char* kRowScratch = "reference.row_scratch";  // per thread: rows in fp64
inline constexpr const char* kDelta = "reference.delta";             // backward: dO.O per query row

// Doubles of row scratch each thread needs, laid out by the pass that uses them.
int64_t forward_scratch_doubles(const Facts& f);
int64_t backward_scratch_doubles(const Facts& f);

void run_forward(const Operands& ops, const Workspace& ws, int threads);
void run_backward(const Operands& ops, const Workspace& ws, int threads);

}  // namespace floe::detail::reference
