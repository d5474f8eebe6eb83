// The fixture of every GPU test: skips cleanly where no CUDA device is usable, so that the
// GPU tests build and pass (as skipped) on the CPU-only CI machine.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "floe/status.h"
#include "floe/target.h"
#include "support/harness_env.h"

namespace floe::test {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!floe::cuda_available()) GTEST_SKIP() << "no CUDA device: GPU test skipped";
    // Tests of one direction carry its name (Battery.Backward, ForwardBitwise, ...).
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    const std::string& only = harness_settings().directions;
    if ((only == "fwd" && name.find("Backward") != std::string::npos) ||
        (only == "bwd" && name.find("Forward") != std::string::npos)) {
      GTEST_SKIP() << "FLOE_DIRECTIONS=" << only << ": the other direction is not under test";
    }
  }
};

inline const Status& status_of(const Status& s) {
  return s;
}
template <class T>
const Status& status_of(const Result<T>& r) {
  return r.status();
}

}  // namespace floe::test

// Asserts that a floe Status or Result is ok, printing its message otherwise.
#define FLOE_ASSERT_OK(expr)                                                                    \
  do {                                                                                          \
    const auto& floe_ok_ = (expr);                                                              \
    ASSERT_TRUE(floe_ok_.ok()) << #expr << ": " << ::floe::test::status_of(floe_ok_).message(); \
  } while (0)
