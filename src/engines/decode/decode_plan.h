// What the decode engine decides at build: whether it serves a problem, the kernel arguments,
// the number of splits and the workspace chunks. Host code only (tests call it without a GPU).
#pragma once

#include <string>

#include "engines/decode/decode_params.h"
#include "engines/engine.h"

namespace floe::detail::decode {

inline constexpr const char* kPartialOChunk = "decode_partial_o";
inline constexpr const char* kPartialLseChunk = "decode_partial_lse";
// int32 [b][h_kv][row tiles]: arrivals of split pieces, zeroed by each execute
inline constexpr const char* kArrivalsChunk = "decode_arrivals";
inline constexpr int64_t kMaxQueries = 16;  // s_q a decode problem may have

// Why the decode engine does not serve this problem on this target; empty when it does.
std::string decline_reason(const Facts& facts, const Target& target);

// Kernel arguments (pointers left null), max_splits included, for an accepted problem.
Params make_params(const Facts& facts, const Target& target);

// Whether the plan's launches may go through the partials and the merge (and zero the counters).
bool uses_partials(const Params& params);

// The partial chunks and the arrival counters, when the plan may split.
void add_workspace(const Facts& facts, const Params& params, WorkspaceLayout& workspace);

// Bytes of the arrival counters (kArrivalsChunk), which each execute zeroes.
size_t arrivals_bytes(const Params& params);

}  // namespace floe::detail::decode
