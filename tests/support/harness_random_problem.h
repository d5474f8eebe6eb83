// Seeded random attention problems over every axis of DESIGN §2 and §5, written as case JSON
// (DESIGN §4, what problem_from_json parses and `floe run` reads) with fresh random float32
// inputs. The same seed gives the same case on every machine.
//
// Axes: f16/bf16; forward (with and without stats) and backward; B, Sq and Skv from 1 up with
// odd sizes; MHA, GQA ratios and MQA; head dims any multiple of 8 up to 256 with Dqk != Dv;
// every tensor (outputs, stats, bias, dbias included) in a random dim order with gaps, an
// inner stride above 1, and odd or zero strides on size-1 dims; no mask, causal, sliding
// window, left-only, right-only and bands (some that empty rows), both alignments; padding
// with zero lengths; bias [1|B, 1|Hq]; sinks; softcap; custom and negative scales;
// deterministic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "case_folder.h"
#include "floe/floe.h"
#include "support/harness_rng.h"

namespace floe::test {

// Sizes stay modest: every case also runs on the fp64 CPU reference (twice for a backward
// case, whose o and stats come from the reference forward).
struct GeneratorLimits {
  int64_t max_b = 3;
  int64_t max_h_q = 12;
  int64_t max_s_q = 520;
  int64_t max_s_kv = 640;
  int64_t max_d = 256;
  // B * Hq * Sq * Skv * (Dqk + Dv): the reference's multiply-adds for one forward.
  int64_t max_work = int64_t{1} << 27;
};

// smoke: small cases for compute-sanitizer (16 + 16); quick and full: the same distribution.
GeneratorLimits generator_limits(const std::string& level);

// The case name that marks a backward problem in problem.json ("op").
inline constexpr const char* kOpForward = "fwd";
inline constexpr const char* kOpBackward = "bwd";

// The strides of the vectors sink, dsink, seq_len_q and seq_len_kv: {name: stride}. The case
// format (tools' problem.json) has no strides for them yet, so the generator keeps them beside
// the problem under this key and make_case applies them to the parsed Problem (and leaves the key
// out of the case's json). A reproducer written from such a case runs the vectors packed.
inline constexpr const char* kVectorStridesKey = "vector_strides";

// A random valid problem.json (plus kVectorStridesKey). `features` (may be null) receives the names
// of what the problem exercises, for the battery's per-feature counts.
nlohmann::json random_problem_json(Rng& rng, Direction direction, const GeneratorLimits& limits,
                                   std::vector<std::string>* features);

// Parses `json` and fills every input with fresh random data, never zero: q k v [bias]
// [sink], the sequence lengths from the JSON, and for a backward case a random do plus the o
// and stats that the reference engine's forward computes from the same inputs.
Result<tool::Case> make_case(const nlohmann::json& json, uint64_t data_seed);

struct GeneratedCase {
  uint64_t seed = 0;
  tool::Case c;
  std::vector<std::string> features;
};

// Case `seed`: random_problem_json then make_case, both from that seed.
Result<GeneratedCase> generate_case(uint64_t seed, Direction direction,
                                    const GeneratorLimits& limits);

// A one-line description: "bwd bf16 b2 hq8/hkv2 sq100 skv300 d128/64 causal,br bias[1,8] ...".
std::string describe(const nlohmann::json& json);

// Fresh random values for a logical array: uniform magnitude in [lo, hi] (lo > 0), random sign.
tool::HostArray random_array(Rng& rng, const std::vector<int64_t>& shape, double lo, double hi);

}  // namespace floe::test
