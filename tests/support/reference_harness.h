// Runs the reference engine on one test case: the tensors in tool::TensorBuffers on the host (the
// strided buffers with poisoned gaps and canaries that `floe run` and the GPU harness use),
// seeded random inputs, the outputs read back as logical fp64 arrays, and a comparison to within
// one ulp of the output dtype.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "case_folder.h"
#include "floe/floe.h"
#include "support/reference_naive.h"

namespace floe::reftest {

// How a tensor lies in memory. Strides are built from the innermost dim outward.
struct Layout {
  std::vector<int> order;  // dims from outermost to innermost; empty: logical order
  int64_t gap = 0;         // elements left unused after each dim's extent
  int64_t inner = 1;       // the innermost dim's stride
  int zero_dim = -1;       // a dim given stride 0 (inputs only: every index reads one element)

  static Layout packed() { return {}; }
  static Layout bshd() { return {{0, 2, 1, 3}, 0, 1, -1}; }  // [B, S, H, D] in memory
  static Layout gaps(int64_t g) { return {{}, g, 1, -1}; }
  static Layout stepped(int64_t inner) { return {{}, 0, inner, -1}; }
  static Layout permuted(std::vector<int> order, int64_t g = 0, int64_t inner = 1) {
    return {std::move(order), g, inner, -1};
  }
  static Layout broadcast(int dim) { return {{}, 0, 1, dim}; }
};

TensorDesc make_desc(DType dtype, const TensorDesc& logical, const Layout& layout);

struct Case {
  std::string name;
  Spec spec;
  DType dtype = DType::bf16;
  int threads = 2;
  std::map<TensorId, Layout> layouts;  // tensors not named here are packed
  uint64_t seed = 1;
  bool stats = true;      // forward: write stats
  bool bias_grad = true;  // backward with a bias: declare dbias
  // Backward: stats are given as the exact LSE plus this shift, to prove they are used as given.
  double lse_shift = 0;
  // When set, the problem as given (any strides), instead of one built from spec and layouts:
  // what case_from_generated makes of the GPU battery's random problems.
  std::optional<Problem> problem;

  // The problem as the case-file JSON of DESIGN §4 (strides included) and the seed.
  std::string describe(Direction dir) const;
};

// gtest prints a parameter by its name, not its bytes.
inline void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

Problem make_problem(const Case& c, Direction dir);

// One run of the engine. `in` holds the inputs as the engine saw them (rounded; along a
// zero-stride dim every index holds the value of the last one); `out` its outputs (forward: o,
// lse; backward: dq, dk, dv, dbias, dsink). `damage` lists what the engine touched outside its
// outputs' elements or in its inputs (TensorBuffers::check_guards), and workspace canaries.
struct EngineRun {
  Status status;
  Tensors in, out;
  std::vector<std::string> damage;
  std::map<TensorId, std::vector<uint8_t>> output_bytes;  // bits of every value, for bitwise
                                                          // comparison
};

// Fills every input with seeded random values; for the backward, o and lse come from the naive
// forward of the rounded inputs.
Tensors random_inputs(const Case& c, Direction dir);
EngineRun run_engine(const Case& c, Direction dir);
EngineRun run_engine(const Case& c, Direction dir, const Tensors& inputs);

// Failures of engine vs want, element by element, after rounding both to dtype: more than one
// ulp apart (plus a 1e-12 floor for fp64 cancellation), or a NaN. Empty when all agree.
std::string compare(const char* name, const std::vector<double>& engine,
                    const std::vector<double>& want, DType dtype);
// Every output of the direction, engine vs naive; the case is described on failure.
std::string compare_outputs(const Case& c, Direction dir, const Tensors& engine,
                            const Tensors& naive);

// One random-problem generator for both harnesses: a case of harness_random_problem (the GPU
// battery's generator; a tool::Case with its inputs) as a reference-harness case and its inputs,
// so that the CPU battery holds the reference engine to the naive formulation on the very
// problems the GPU battery holds the GPU engines to the reference on.
struct ReferenceInputs {
  Case c;
  Direction dir = Direction::forward;
  Tensors inputs;
};
Result<ReferenceInputs> case_from_generated(const tool::Case& generated, const std::string& name);

// Runs the engine on c's random inputs and holds every output to the naive formulation: one
// ulp of the output dtype, no byte touched outside the outputs. Empty when all is well.
std::string check_against_naive(const Case& c, Direction dir);

}  // namespace floe::reftest
