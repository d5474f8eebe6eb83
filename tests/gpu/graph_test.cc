// P6, graph safety: plan.execute captured into a CUDA graph (global capture mode, so that any
// call unsafe under capture fails it) runs nothing while captured, and every replay writes
// what a direct execute writes, bitwise where the plan is deterministic and within the
// reference's tolerance always. Sequence lengths changed between replays through the device
// arrays (cudaMemcpyAsync before the replay) give the results of a direct execute with those
// lengths: the lengths are values read at run time, not constants baked in at capture.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

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

using nlohmann::json;

// A captured execute of one prepared run, on its own stream.
class CapturedExecute {
 public:
  ~CapturedExecute() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  // Captures run.execute(stream). The status is execute's, or the capture's failure.
  Status capture(const PreparedRun& run, cudaStream_t stream) {
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) != cudaSuccess) {
      return device_sync("cudaStreamBeginCapture");
    }
    const Status st = run.execute(stream);
    const cudaError_t end = cudaStreamEndCapture(stream, &graph_);
    if (!st) return st;
    if (end != cudaSuccess) {
      cudaGetLastError();
      return Status(Code::device_error, std::string("capture of execute failed (a call unsafe "
                                                    "under capture?): ") +
                                            cudaGetErrorString(end));
    }
    if (cudaGraphInstantiate(&exec_, graph_, 0) != cudaSuccess) {
      return device_sync("cudaGraphInstantiate");
    }
    return Status();
  }
  Status replay(cudaStream_t stream) const {
    const cudaError_t err = cudaGraphLaunch(exec_, stream);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return Status(Code::device_error, std::string("cudaGraphLaunch: ") + cudaGetErrorString(err));
    }
    return Status();
  }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

class Graph : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }

 public:
  cudaStream_t stream_ = nullptr;
};

// Every element of every output still holds the poison: nothing ran.
void expect_all_poisoned(const tool::ArrayMap& outputs, const char* when) {
  for (const auto& [name, a] : outputs) {
    int64_t written = 0;
    for (float x : a.data) written += !std::isnan(x);
    EXPECT_EQ(written, 0) << name << ": " << written << " elements written " << when;
  }
}

void replay_equals_direct(Direction dir, cudaStream_t stream) {
  int checked = 0;
  for (bool deterministic : {true, false}) {
    for (NamedProblem& np : named_problems(dir)) {
      np.json["deterministic"] = deterministic;
      const std::string name = "graph-" + np.name + (deterministic ? "-det" : "");
      SCOPED_TRACE(name);
      Result<tool::Case> c = make_case(np.json, 11);
      FLOE_ASSERT_OK(c);
      Result<Plan> plan = build_plan(c->problem, tool::Memory::device, harness_settings().engine);
      if (declined_by_pinned_engine(plan)) continue;
      FLOE_ASSERT_OK(plan);
      Result<PreparedRun> run = PreparedRun::create(*c, *plan, tool::Memory::device);
      FLOE_ASSERT_OK(run);

      FLOE_ASSERT_OK(run->execute(stream));
      Result<tool::ArrayMap> direct = run->finish();
      FLOE_ASSERT_OK(direct);

      FLOE_ASSERT_OK(run->poison());
      CapturedExecute graph;
      FLOE_ASSERT_OK(graph.capture(*run, stream));
      Result<tool::ArrayMap> after_capture = run->finish();
      FLOE_ASSERT_OK(after_capture);
      expect_all_poisoned(*after_capture, "by the capture alone");

      for (int replay = 0; replay < 3; ++replay) {
        FLOE_ASSERT_OK(run->poison());
        FLOE_ASSERT_OK(run->scramble_workspace(static_cast<unsigned char>(0x11 * replay)));
        FLOE_ASSERT_OK(graph.replay(stream));
        Result<tool::ArrayMap> replayed = run->finish();
        FLOE_ASSERT_OK(replayed);
        if (deterministic) {
          const Comparison bits = compare_bitwise(*replayed, *direct);
          EXPECT_TRUE(bits.ok()) << "replay " << replay
                                 << " differs from the direct execute: " << bits.summary();
        }
        expect_matches_reference(name + "-replay" + std::to_string(replay), *c, *replayed);
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 0) << "the engine declined every problem";
}

TEST_F(Graph, ForwardReplayEqualsDirect) {
  replay_equals_direct(Direction::forward, stream_);
}

TEST_F(Graph, BackwardReplayEqualsDirect) {
  replay_equals_direct(Direction::backward, stream_);
}

// The problem of the length tests: padding on both sides, a bottom-right causal mask (its
// diagonal moves with the lengths), a bias and a sink.
json padded_problem(Direction dir) {
  json j = problem_json(dir, "bf16", 3, 4, 2, 37, 53, 64, 48);
  j["mask"] = {{"align", "bottom_right"}, {"left", nullptr}, {"right", 0}};
  j["bias"] = {1, 4};
  j["sink"] = true;
  j["seq_len_q"] = {37, 20, 5};
  j["seq_len_kv"] = {53, 31, 9};
  j["deterministic"] = true;
  if (dir == Direction::forward) j["stats"] = true;
  return j;
}

// Copies `bytes` of a device tensor of `from` into the same tensor of `to` on `stream`.
void copy_tensor_async(const PreparedRun& from, const PreparedRun& to, TensorId id,
                       cudaStream_t stream) {
  const TensorDesc& d = *from.plan().problem().tensor(id);
  ASSERT_EQ(cudaMemcpyAsync(to.arguments().get(id), from.arguments().get(id), d.span_bytes(),
                            cudaMemcpyDeviceToDevice, stream),
            cudaSuccess);
}

void lengths_change_between_replays(Direction dir, cudaStream_t stream) {
  const json base = padded_problem(dir);
  Result<tool::Case> c0 = make_case(base, 23);
  FLOE_ASSERT_OK(c0);
  Result<Plan> plan = build_plan(c0->problem, tool::Memory::device, harness_settings().engine);
  if (declined_by_pinned_engine(plan)) {
    GTEST_SKIP() << "engine declines: " << plan.status().message();
  }
  FLOE_ASSERT_OK(plan);
  Result<PreparedRun> run = PreparedRun::create(*c0, *plan, tool::Memory::device);
  FLOE_ASSERT_OK(run);
  CapturedExecute graph;
  FLOE_ASSERT_OK(graph.capture(*run, stream));

  // Pinned host memory for the lengths, so that the copies are truly asynchronous.
  int32_t* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 6 * sizeof(int32_t)), cudaSuccess);
  const std::vector<std::pair<std::vector<int>, std::vector<int>>> lengths = {
      {{37, 1, 17}, {53, 0, 29}},  // one batch with no keys at all
      {{0, 0, 0}, {0, 0, 0}},      // nothing to do: every output row must still be written
      {{37, 37, 37}, {53, 53, 53}},
      {{5, 36, 1}, {1, 52, 53}},   // more queries than keys: rows above the diagonal are empty
      {{37, 20, 5}, {53, 31, 9}},  // back to the captured lengths
  };
  for (size_t k = 0; k < lengths.size(); ++k) {
    const auto& [lq, lkv] = lengths[k];
    const std::string name = std::string("graph-lengths-") +
                             (dir == Direction::forward ? "fwd-" : "bwd-") + std::to_string(k);
    SCOPED_TRACE(name);
    json j = base;
    j["seq_len_q"] = lq;
    j["seq_len_kv"] = lkv;
    // The same data (same seed); a backward case's o and stats are recomputed for the lengths.
    Result<tool::Case> c = make_case(j, 23);
    FLOE_ASSERT_OK(c);
    Result<PreparedRun> direct_run = PreparedRun::create(*c, *plan, tool::Memory::device);
    FLOE_ASSERT_OK(direct_run);
    FLOE_ASSERT_OK(direct_run->execute(stream));
    Result<tool::ArrayMap> direct = direct_run->finish();
    FLOE_ASSERT_OK(direct);

    FLOE_ASSERT_OK(run->poison());
    for (int i = 0; i < 3; ++i) {
      pinned[i] = lq[i];
      pinned[3 + i] = lkv[i];
    }
    const Arguments args = run->arguments();
    ASSERT_EQ(cudaMemcpyAsync(args.get(TensorId::seq_len_q), pinned, 3 * sizeof(int32_t),
                              cudaMemcpyHostToDevice, stream),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(args.get(TensorId::seq_len_kv), pinned + 3, 3 * sizeof(int32_t),
                              cudaMemcpyHostToDevice, stream),
              cudaSuccess);
    if (dir == Direction::backward) {  // inputs that depend on the lengths
      copy_tensor_async(*direct_run, *run, TensorId::o, stream);
      copy_tensor_async(*direct_run, *run, TensorId::stats, stream);
    }
    FLOE_ASSERT_OK(graph.replay(stream));
    // The buffers' guards compare inputs with what was uploaded: record the new values
    // (the same bytes the copies wrote) once the replay is done.
    FLOE_ASSERT_OK(device_sync("replay"));
    std::vector<std::string> rewritten = {"seq_len_q", "seq_len_kv"};
    if (dir == Direction::backward) rewritten.insert(rewritten.end(), {"o", "stats"});
    for (const std::string& input : rewritten) {
      FLOE_ASSERT_OK(run->buffers().upload(tool::tensor_of(input), c->inputs.at(input)));
    }
    Result<tool::ArrayMap> replayed = run->finish();
    FLOE_ASSERT_OK(replayed);
    const Comparison bits = compare_bitwise(*replayed, *direct);
    EXPECT_TRUE(bits.ok()) << "replay with new lengths differs from a direct execute: "
                           << bits.summary();
    expect_matches_reference(name, *c, *replayed);
  }
  cudaFreeHost(pinned);
}

TEST_F(Graph, ForwardLengthsChangeBetweenReplays) {
  lengths_change_between_replays(Direction::forward, stream_);
}

TEST_F(Graph, BackwardLengthsChangeBetweenReplays) {
  lengths_change_between_replays(Direction::backward, stream_);
}

}  // namespace
}  // namespace floe::test
