// The fixture of every GPU test: skips cleanly where no CUDA device is usable, so that the
// GPU tests build and pass (as skipped) on the CPU-only CI machine.
#pragma once

#include <gtest/gtest.h>

#include "floe/status.h"
#include "floe/target.h"

namespace floe::test {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!floe::cuda_available()) GTEST_SKIP() << "no CUDA device: GPU test skipped";
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
