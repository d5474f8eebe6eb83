// kernels/fast_divisor.h against the division it replaces, on the host (the same arithmetic as
// the device's __umulhi): every divisor up to 5000 and random ones up to 2^31 - 1, each with
// dividends at the edges (0, d - 1, d, multiples of d and their neighbours, 2^31 - 1) and random
// ones below 2^31.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/fast_divisor.h"

namespace floe {
namespace {

using kernels::FastDivisor;

constexpr uint32_t kMaxDividend = 0x7fffffffu;

std::vector<uint32_t> dividends(uint32_t d, std::mt19937_64& rng) {
  std::vector<uint32_t> ns = {0, 1, d - 1, d, kMaxDividend, kMaxDividend - 1};
  for (uint64_t k = 1; k < 64; ++k) {
    const uint64_t v = uint64_t{d} * k;
    if (v > kMaxDividend) break;
    ns.push_back(static_cast<uint32_t>(v - 1));
    ns.push_back(static_cast<uint32_t>(v));
    if (v + 1 <= kMaxDividend) ns.push_back(static_cast<uint32_t>(v + 1));
  }
  for (int i = 0; i < 200; ++i)
    ns.push_back(static_cast<uint32_t>(rng() % (uint64_t{kMaxDividend} + 1)));
  return ns;
}

void check(uint32_t d, std::mt19937_64& rng) {
  const FastDivisor f(d);
  for (uint32_t n : dividends(d, rng)) {
    ASSERT_EQ(f.div(n), n / d) << "n = " << n << ", d = " << d;
  }
}

TEST(FastDivisor, SmallDivisors) {
  std::mt19937_64 rng(7);
  for (uint32_t d = 1; d <= 5000; ++d) check(d, rng);
}

TEST(FastDivisor, LargeDivisors) {
  std::mt19937_64 rng(11);
  for (uint32_t d : {1u << 30, (1u << 30) + 1, (1u << 30) - 1, kMaxDividend, kMaxDividend - 1}) {
    check(d, rng);
  }
  for (int i = 0; i < 2000; ++i) check(1 + static_cast<uint32_t>(rng() % kMaxDividend), rng);
}

// A planted fault is caught: one less in the multiplier is wrong somewhere for most divisors.
TEST(FastDivisor, WrongMultiplierIsCaught) {
  FastDivisor f(7);
  f.mul -= 1;
  bool caught = false;
  for (uint32_t n = 0; n < 1000000 && !caught; ++n) caught = f.div(n) != n / 7;
  EXPECT_TRUE(caught);
}

}  // namespace
}  // namespace floe
