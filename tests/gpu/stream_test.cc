// P1/P2 on streams. An execute on a non-blocking stream queued behind long work (a 50 ms
// spin, then the very writes of its inputs) returns at once, runs after that work and gives
// the right result: the engine uses the caller's stream and no other. The first execute of a
// plan returns at once too, even while the GPU is busy (CUDA loads kernels lazily, and a
// module load waits for the device to go idle, unless the plan loaded its kernels at build).
// Two threads executing one plan at once, each with its own buffers, workspace and stream,
// each get their own right answer: a built plan is immutable and shareable. A thread that has
// never called CUDA (no current context: a worker pool's, autograd's) executes a plan built
// elsewhere and gets the right answer too.
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "support/gpu_spin.h"
#include "support/harness_compare.h"
#include "support/harness_env.h"
#include "support/harness_expect.h"
#include "support/harness_failure.h"
#include "support/harness_gpu_test.h"
#include "support/harness_named_problems.h"
#include "support/harness_random_problem.h"
#include "support/harness_runner.h"

namespace floe::test {
namespace {

constexpr double kSpinMs = 50;

class Streams : public GpuTest {};

// The tensors execute reads.
std::vector<TensorId> input_tensors(const Problem& p) {
  std::vector<TensorId> ids;
  for (const std::string& name : tool::input_names(p)) ids.push_back(tool::tensor_of(name));
  return ids;
}

// For each named problem of `dir` that the pinned engine serves: its case (from `seed`), plan and
// run on device buffers, handed to check(name, case, run); fails if the engine declined them all.
template <class Check>
void for_each_served(Direction dir, const std::string& prefix, uint64_t seed, Check&& check) {
  int checked = 0;
  for (const NamedProblem& np : named_problems(dir)) {
    const std::string name = prefix + np.name;
    SCOPED_TRACE(name);
    Result<tool::Case> c = make_case(np.json, seed);
    FLOE_ASSERT_OK(c);
    Result<Plan> plan = build_plan(c->problem, tool::Memory::device, harness_settings().engine);
    if (declined_by_pinned_engine(plan)) continue;
    FLOE_ASSERT_OK(plan);
    Result<PreparedRun> run = PreparedRun::create(*c, *plan, tool::Memory::device);
    FLOE_ASSERT_OK(run);
    check(name, *c, *run);
    if (::testing::Test::HasFatalFailure()) return;
    ++checked;
  }
  EXPECT_GT(checked, 0) << "the engine declined every problem";
}

void execute_behind_long_work(Direction dir) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for_each_served(
      dir, "stream-", 31, [&](const std::string& name, const tool::Case& c, PreparedRun& run) {
        // One execute on an idle GPU first: the first execute's own cost is FirstExecute's test.
        FLOE_ASSERT_OK(run.execute(stream));
        FLOE_ASSERT_OK(run.finish());
        FLOE_ASSERT_OK(run.poison());

        // Keep the real inputs (every byte of each span, gaps included) aside, and wreck them in
        // place: an execute that does not wait for the queued copies reads NaN (or zero lengths).
        const Arguments args = run.arguments();
        std::vector<std::pair<TensorId, void*>> saved;
        for (TensorId id : input_tensors(c.problem)) {
          const size_t bytes = c.problem.tensor(id)->span_bytes();
          void* copy = nullptr;
          ASSERT_EQ(cudaMalloc(&copy, bytes), cudaSuccess);
          ASSERT_EQ(cudaMemcpy(copy, args.get(id), bytes, cudaMemcpyDeviceToDevice), cudaSuccess);
          const bool lengths = id == TensorId::seq_len_q || id == TensorId::seq_len_kv;
          ASSERT_EQ(cudaMemset(args.get(id), lengths ? 0x00 : 0xFF, bytes), cudaSuccess);
          saved.emplace_back(id, copy);
        }
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

        // Long work first, then the slow arrival of the inputs, then the execute.
        FLOE_ASSERT_OK(enqueue_spin(stream, kSpinMs));
        for (const auto& [id, copy] : saved) {
          ASSERT_EQ(cudaMemcpyAsync(args.get(id), copy, c.problem.tensor(id)->span_bytes(),
                                    cudaMemcpyDeviceToDevice, stream),
                    cudaSuccess);
        }
        const auto t0 = std::chrono::steady_clock::now();
        const Status st = run.execute(stream);
        const double host_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        const cudaError_t busy = cudaStreamQuery(stream);
        FLOE_ASSERT_OK(st);
        // Execute returned while the spin still ran: it did not wait for the stream.
        EXPECT_EQ(busy, cudaErrorNotReady) << "the stream was idle when execute returned ("
                                           << host_ms << " ms): execute synchronised";
        EXPECT_LT(host_ms, kSpinMs / 2) << "execute blocked the host";
        Result<tool::ArrayMap> got = run.finish();
        FLOE_ASSERT_OK(got);
        expect_matches_reference(name, c, *got);
        for (const auto& [id, copy] : saved) cudaFree(copy);
      });
  cudaStreamDestroy(stream);
}

TEST_F(Streams, ForwardRunsBehindLongWork) {
  execute_behind_long_work(Direction::forward);
}

TEST_F(Streams, BackwardRunsBehindLongWork) {
  execute_behind_long_work(Direction::backward);
}

// Alone in its process (ctest runs every test so), the first execute of a plan is also the
// first launch of its kernels.
void first_execute_does_not_block(Direction dir) {
  const NamedProblem np = named_problems(dir)[1];
  Result<tool::Case> c = make_case(np.json, 37);
  FLOE_ASSERT_OK(c);
  Result<Plan> plan = build_plan(c->problem, tool::Memory::device, harness_settings().engine);
  if (declined_by_pinned_engine(plan))
    GTEST_SKIP() << "engine declines: " << plan.status().message();
  FLOE_ASSERT_OK(plan);
  Result<PreparedRun> run = PreparedRun::create(*c, *plan, tool::Memory::device);
  FLOE_ASSERT_OK(run);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  FLOE_ASSERT_OK(enqueue_spin(stream, kSpinMs));
  const auto t0 = std::chrono::steady_clock::now();
  const Status st = run->execute(stream);
  const double host_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const cudaError_t busy = cudaStreamQuery(stream);
  FLOE_ASSERT_OK(st);
  EXPECT_EQ(busy, cudaErrorNotReady) << "the spin had ended when execute returned";
  EXPECT_LT(host_ms, kSpinMs / 2)
      << "the first execute of " << plan->engine() << " blocked the host for " << host_ms
      << " ms behind a busy GPU: with CUDA's lazy module loading (the default) the first "
         "launch of a kernel loads its module, which waits for the device to go idle. Load "
         "the kernels when the plan is built (cudaFuncGetAttributes on each), as P1 wants.";
  Result<tool::ArrayMap> got = run->finish();
  FLOE_ASSERT_OK(got);
  expect_matches_reference("first-execute-" + np.name, *c, *got);
  cudaStreamDestroy(stream);
}

TEST_F(Streams, ForwardFirstExecuteDoesNotBlock) {
  first_execute_does_not_block(Direction::forward);
}

TEST_F(Streams, BackwardFirstExecuteDoesNotBlock) {
  first_execute_does_not_block(Direction::backward);
}

void two_threads_one_plan(Direction dir) {
  constexpr int kRounds = 20;
  int checked = 0;
  for (const NamedProblem& np : named_problems(dir)) {
    const std::string name = "threads-" + np.name;
    SCOPED_TRACE(name);
    // One problem, two data sets: each thread's answer is its own.
    Result<tool::Case> c[2] = {make_case(np.json, 41), make_case(np.json, 43)};
    FLOE_ASSERT_OK(c[0]);
    FLOE_ASSERT_OK(c[1]);
    Result<Plan> plan = build_plan(c[0]->problem, tool::Memory::device, harness_settings().engine);
    if (declined_by_pinned_engine(plan)) continue;
    FLOE_ASSERT_OK(plan);
    Result<PreparedRun> run[2] = {PreparedRun::create(*c[0], *plan, tool::Memory::device),
                                  PreparedRun::create(*c[1], *plan, tool::Memory::device)};
    FLOE_ASSERT_OK(run[0]);
    FLOE_ASSERT_OK(run[1]);

    std::atomic<int> ready{0};
    Status status[2];
    auto body = [&](int t) {
      cudaStream_t stream = nullptr;
      if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
        status[t] = Status(Code::device_error, "stream creation failed");
        return;
      }
      ready.fetch_add(1);
      while (ready.load() < 2) std::this_thread::yield();  // start together
      for (int r = 0; r < kRounds && status[t].ok(); ++r) status[t] = run[t]->execute(stream);
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    };
    std::thread a(body, 0), b(body, 1);
    a.join();
    b.join();
    for (int t = 0; t < 2; ++t) {
      FLOE_ASSERT_OK(status[t]);
      Result<tool::ArrayMap> got = run[t]->finish();
      FLOE_ASSERT_OK(got);
      expect_matches_reference(name + "-thread" + std::to_string(t), *c[t], *got);
    }
    ++checked;
  }
  EXPECT_GT(checked, 0) << "the engine declined every problem";
}

// The plan, buffers and stream made on this thread; the execute, and nothing else, on a thread
// that has not called CUDA before (no current context).
void execute_on_a_thread_new_to_cuda(Direction dir) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for_each_served(dir, "fresh-thread-", 47,
                  [&](const std::string& name, const tool::Case& c, PreparedRun& run) {
                    FLOE_ASSERT_OK(run.poison());
                    Status st;
                    std::thread t([&] { st = run.execute(stream); });
                    t.join();
                    FLOE_ASSERT_OK(st);
                    Result<tool::ArrayMap> got = run.finish();
                    FLOE_ASSERT_OK(got);
                    expect_matches_reference(name, c, *got);
                  });
  cudaStreamDestroy(stream);
}

TEST_F(Streams, ForwardTwoThreadsOnePlan) {
  two_threads_one_plan(Direction::forward);
}

TEST_F(Streams, BackwardTwoThreadsOnePlan) {
  two_threads_one_plan(Direction::backward);
}

TEST_F(Streams, ForwardOnAThreadNewToCuda) {
  execute_on_a_thread_new_to_cuda(Direction::forward);
}

TEST_F(Streams, BackwardOnAThreadNewToCuda) {
  execute_on_a_thread_new_to_cuda(Direction::backward);
}

}  // namespace
}  // namespace floe::test
