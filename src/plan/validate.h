// Validation: every rule of DESIGN §2 a problem can break, checked once at build.
#pragma once

#include <string>
#include <vector>

#include "floe/problem.h"
#include "floe/status.h"

namespace floe::detail {

// Every broken rule, each naming the tensor, the field and the rule. Empty when valid.
std::vector<std::string> validate(const Problem& problem);

// The first error as a Status (Code::invalid_problem), or ok.
Status validate_status(const Problem& problem);

// True when no two distinct index tuples of the desc address the same element: outputs must
// not overlap themselves.
bool is_non_overlapping(const TensorDesc& desc);

// True for the tensors a problem of this direction writes.
bool is_output(TensorId id, Direction dir);

}  // namespace floe::detail
