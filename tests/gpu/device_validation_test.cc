// P3 on the device: an execute with a null, undersized or misaligned workspace, a missing
// pointer, a pointer the plan does not declare, or a misaligned tensor pointer returns the
// error before any launch, and no output byte changes: every output element still holds its
// poison, canaries and stride gaps intact. After all that, a correct execute still works.
#include <cuda_runtime_api.h>

#include <cmath>
#include <string>
#include <vector>

#include "support/harness_compare.h"
#include "support/harness_env.h"
#include "support/harness_expect.h"
#include "support/harness_gpu_test.h"
#include "support/harness_named_problems.h"
#include "support/harness_random_problem.h"
#include "support/harness_runner.h"

namespace floe::test {
namespace {

class Validation : public GpuTest {};

// Waits, checks the guards, and expects every output element still poisoned.
void expect_untouched(const PreparedRun& run, const std::string& what) {
  Result<tool::ArrayMap> out = run.finish();
  ASSERT_TRUE(out.ok()) << what << ": " << out.status().message();
  for (const auto& [name, a] : *out) {
    int64_t written = 0;
    for (float x : a.data) written += !std::isnan(x);
    EXPECT_EQ(written, 0) << what << ": " << written << " elements of '" << name
                          << "' were written by a failing execute";
  }
}

void expect_error(const Status& st, Code code, const std::string& mention,
                  const std::string& what) {
  EXPECT_FALSE(st.ok()) << what << ": accepted";
  EXPECT_EQ(st.code(), code) << what << ": " << to_string(st.code()) << ": " << st.message();
  EXPECT_NE(st.message().find(mention), std::string::npos)
      << what << ": the message should mention '" << mention << "': " << st.message();
}

// Every named problem: each bad argument in turn, then the good ones.
void refuses_bad_arguments(Direction dir) {
  const std::string engine = harness_settings().engine;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  int checked = 0;
  for (const NamedProblem& np : named_problems(dir)) {
    SCOPED_TRACE(np.name);
    Result<tool::Case> c = make_case(np.json, 61);
    FLOE_ASSERT_OK(c);
    Result<Plan> plan = build_plan(c->problem, tool::Memory::device, engine);
    if (declined_by_pinned_engine(plan)) continue;
    FLOE_ASSERT_OK(plan);
    Result<PreparedRun> run = PreparedRun::create(*c, *plan, tool::Memory::device);
    FLOE_ASSERT_OK(run);
    const Arguments args = run->arguments();
    const size_t need = plan->workspace_bytes();
    void* ws = run->workspace();

    if (need > 0) {
      expect_error(plan->execute(args, nullptr, need, stream), Code::workspace,
                   std::to_string(need), "null workspace");
      expect_error(plan->execute(args, ws, need - 1, stream), Code::workspace, std::to_string(need),
                   "undersized workspace");
      // A buffer large enough, but starting off the 256-byte grid.
      void* big = nullptr;
      ASSERT_EQ(cudaMalloc(&big, need + 2 * kWorkspaceAlignment), cudaSuccess);
      for (size_t shift : {size_t{1}, size_t{16}, size_t{128}}) {
        expect_error(plan->execute(args, static_cast<char*>(big) + shift,
                                   need + kWorkspaceAlignment, stream),
                     Code::workspace, "align", "workspace misaligned by " + std::to_string(shift));
      }
      expect_untouched(*run, "after the workspace errors");
      cudaFree(big);
    }

    // Every declared tensor, missing in turn.
    for (int i = 0; i < kTensorCount; ++i) {
      const auto id = static_cast<TensorId>(i);
      if (!c->problem.has(id)) continue;
      Arguments missing = args;
      missing.set(id, nullptr);
      expect_error(plan->execute(missing, ws, need, stream), Code::invalid_argument, to_string(id),
                   std::string("missing '") + to_string(id) + "'");
    }
    // Pointers the plan does not declare.
    for (int i = 0; i < kTensorCount; ++i) {
      const auto id = static_cast<TensorId>(i);
      if (c->problem.has(id)) continue;
      Arguments extra = args;
      extra.set(id, args.get(TensorId::q));
      expect_error(plan->execute(extra, ws, need, stream), Code::invalid_argument, to_string(id),
                   std::string("undeclared '") + to_string(id) + "'");
    }
    // A tensor pointer off its element grid (one byte: no engine can accept it).
    for (TensorId id : {TensorId::q, dir == Direction::forward ? TensorId::o : TensorId::dq}) {
      Arguments skewed = args;
      skewed.set(id, static_cast<char*>(args.get(id)) + 1);
      expect_error(plan->execute(skewed, ws, need, stream), Code::invalid_argument, to_string(id),
                   std::string("misaligned '") + to_string(id) + "'");
    }
    expect_untouched(*run, "after every refused execute");

    // And then the plan still works.
    FLOE_ASSERT_OK(plan->execute(args, ws, need, stream));
    Result<tool::ArrayMap> got = run->finish();
    FLOE_ASSERT_OK(got);
    expect_matches_reference("validation-" + np.name, *c, *got);
    ++checked;
  }
  cudaStreamDestroy(stream);
  EXPECT_GT(checked, 0) << "engine " << engine << " declined every problem";
}

TEST_F(Validation, ForwardRefusesBadArgumentsAndWritesNothing) {
  refuses_bad_arguments(Direction::forward);
}

TEST_F(Validation, BackwardRefusesBadArgumentsAndWritesNothing) {
  refuses_bad_arguments(Direction::backward);
}

}  // namespace
}  // namespace floe::test
