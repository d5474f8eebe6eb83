// Host arrays for cases a test builds by hand: normal(0, scale) values drawn from the test's own
// seeded engine, and integer arrays (offsets, lengths, block tables) held as floats, as the case
// library keeps them.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "case_folder.h"

namespace floe::test {

inline tool::HostArray random_array(const std::vector<int64_t>& shape, std::mt19937& rng,
                                    float scale = 1.f) {
  tool::HostArray a;
  a.shape = shape;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::normal_distribution<float> dist(0.f, scale);
  a.data.resize(static_cast<size_t>(n));
  for (float& x : a.data) x = dist(rng);
  return a;
}

inline tool::HostArray int_array(const std::vector<int64_t>& shape,
                                 const std::vector<int64_t>& values) {
  tool::HostArray a;
  a.shape = shape;
  for (int64_t v : values) a.data.push_back(static_cast<float>(v));
  return a;
}

}  // namespace floe::test
