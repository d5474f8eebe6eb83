#include "support/harness_expect.h"

#include <gtest/gtest.h>

#include "support/harness_compare.h"
#include "support/harness_env.h"
#include "support/harness_failure.h"
#include "support/harness_runner.h"

namespace floe::test {

void expect_matches_reference(const std::string& name, const tool::Case& c,
                              const tool::ArrayMap& got) {
  Result<tool::ArrayMap> want = run_reference(c);
  ASSERT_TRUE(want.ok()) << name << ": reference: " << want.status().message();
  const Comparison cmp = compare_outputs(c, got, *want);
  EXPECT_TRUE(cmp.ok()) << name << ": " << cmp.summary() << "reproduce: "
                        << write_failure(harness_settings().failure_dir, name, c,
                                         harness_settings().engine, cmp.summary(), &got, &*want);
}

}  // namespace floe::test
