// The GPU battery's generator on the CPU (no engine runs here but the reference, which fills a
// backward case's o and stats): its problems are valid, and every tensor gets random strides
// now and then, the vectors sink, dsink, seq_len_q and seq_len_kv included (issue 11 item 4), so
// that an engine reading one of them as packed fails the battery.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "plan/validate.h"
#include "support/harness_random_problem.h"

namespace floe::test {
namespace {

bool packed(const TensorDesc& d) {
  int64_t stride = 1;
  for (int i = d.rank - 1; i >= 0; --i) {
    if (d.dims[i] > 1 && d.strides[i] != stride) return false;
    stride *= d.dims[i];
  }
  return true;
}

TEST(RandomProblem, EveryTensorIsSometimesStrided) {
  std::map<std::string, int> declared, strided;
  const GeneratorLimits limits = generator_limits("smoke");
  for (Direction dir : {Direction::forward, Direction::backward}) {
    for (uint64_t seed = 1; seed <= 120; ++seed) {
      Result<GeneratedCase> g = generate_case(seed, dir, limits);
      ASSERT_TRUE(g.ok()) << "seed " << seed << ": " << g.status().message();
      const Problem& p = g->c.problem;
      ASSERT_TRUE(detail::validate(p).empty()) << detail::validate(p).front();
      for (int i = 0; i < kTensorCount; ++i) {
        const auto id = static_cast<TensorId>(i);
        if (!p.has(id)) continue;
        ++declared[to_string(id)];
        if (!packed(*p.tensor(id))) ++strided[to_string(id)];
      }
    }
  }
  for (const char* name : {"q", "k", "v", "o", "stats", "bias", "do", "dq", "dk", "dv", "dbias",
                           "sink", "dsink", "seq_len_q", "seq_len_kv"}) {
    EXPECT_GT(declared[name], 0) << name << " never declared";
    EXPECT_GT(strided[name], 0) << name << " never strided in " << declared[name] << " cases";
  }
}

}  // namespace
}  // namespace floe::test
