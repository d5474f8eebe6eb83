// The P2 detectors, proven: each catches a planted fault inside its scope, naming the API,
// stays silent for asynchronous work and outside its scope, and then stays silent around
// plan.execute for forward and backward plans of several feature combinations (which must
// also produce the right outputs: a silent execute that did nothing proves nothing).
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <string>
#include <thread>

#include "support/gpu_detectors.h"
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

// Escapes a pointer so that the compiler cannot drop the allocation that made it.
void* volatile g_sink = nullptr;

// A driver entry point fetched through the runtime (no link against libcuda needed).
template <class Fn>
Fn driver_fn(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    return nullptr;
  }
  return reinterpret_cast<Fn>(fn);
}

// The tables need no GPU: they run everywhere.
TEST(DetectorTables, NormalizesAndClassifies) {
  EXPECT_EQ(normalize_api_name("cudaMalloc_v3020"), "cudaMalloc");
  EXPECT_EQ(normalize_api_name("cuMemAlloc_v2"), "cuMemAlloc");
  EXPECT_EQ(normalize_api_name("cudaStreamSynchronize_ptsz_v7000"), "cudaStreamSynchronize");
  EXPECT_EQ(normalize_api_name("cuMemcpyHtoDAsync_v2_ptsz"), "cuMemcpyHtoDAsync");
  EXPECT_EQ(normalize_api_name("cudaLaunchKernel"), "cudaLaunchKernel");
  for (const char* a :
       {"cudaMalloc",      "cudaMallocHost",          "cudaHostAlloc",     "cudaMallocManaged",
        "cudaMallocAsync", "cudaMallocFromPoolAsync", "cudaMallocPitch",   "cudaFree",
        "cudaFreeAsync",   "cuMemAlloc_v2",           "cuMemAllocHost_v2", "cuMemAllocManaged",
        "cuMemAllocAsync", "cuMemAllocFromPoolAsync", "cuMemCreate",       "cuMemHostAlloc",
        "cuMemFree_v2",    "cudaStreamCreate",        "cuEventCreate",     "cudaHostRegister"}) {
    EXPECT_TRUE(is_allocation_api(a)) << a;
  }
  for (const char* s :
       {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
        "cudaMemcpy2D", "cudaMemset", "cudaStreamQuery", "cudaEventQuery", "cudaFree",
        "cuCtxSynchronize", "cuStreamSynchronize_ptsz", "cuEventSynchronize", "cuMemcpyDtoH_v2",
        "cuMemcpy", "cuMemsetD8_v2", "cuStreamQuery"}) {
    EXPECT_TRUE(is_sync_api(s)) << s;
  }
  for (const char* q :
       {"cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync", "cudaMemcpy2DAsync",
        "cudaGetDevice", "cudaFuncSetAttribute", "cudaStreamWaitEvent", "cudaEventRecord",
        "cuLaunchKernel", "cuMemcpyHtoDAsync_v2", "cuMemsetD32Async", "cudaGetLastError"}) {
    EXPECT_FALSE(is_allocation_api(q)) << q;
    EXPECT_FALSE(is_sync_api(q)) << q;
  }
}

class Detectors : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    FLOE_ASSERT_OK(detectors_available());
    ASSERT_EQ(cudaFree(nullptr), cudaSuccess);  // the primary context exists from here on
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

// --- Planted allocations.

TEST_F(Detectors, AllocationCatchesCudaMalloc) {
  void* p = nullptr;
  AllocationDetector d;
  ASSERT_EQ(cudaMalloc(&p, 1 << 20), cudaSuccess);
  const Detection r = d.finish();
  cudaFree(p);
  EXPECT_TRUE(r.contains("cudaMalloc")) << r.describe();
}

TEST_F(Detectors, AllocationCatchesPinnedManagedAndAsync) {
  void *host = nullptr, *pinned = nullptr, *managed = nullptr, *async = nullptr;
  AllocationDetector d;
  ASSERT_EQ(cudaMallocHost(&host, 4096), cudaSuccess);
  ASSERT_EQ(cudaHostAlloc(&pinned, 4096, cudaHostAllocDefault), cudaSuccess);
  ASSERT_EQ(cudaMallocManaged(&managed, 4096), cudaSuccess);
  ASSERT_EQ(cudaMallocAsync(&async, 4096, stream_), cudaSuccess);
  const Detection r = d.finish();
  cudaFreeAsync(async, stream_);
  cudaStreamSynchronize(stream_);
  cudaFreeHost(host);
  cudaFreeHost(pinned);
  cudaFree(managed);
  for (const char* api :
       {"cudaMallocHost", "cudaHostAlloc", "cudaMallocManaged", "cudaMallocAsync"}) {
    EXPECT_TRUE(r.contains(api)) << api << " not seen; seen: " << r.describe();
  }
}

TEST_F(Detectors, AllocationCatchesDriverCuMemAlloc) {
  using MemAlloc = CUresult (*)(CUdeviceptr*, size_t);
  using MemFree = CUresult (*)(CUdeviceptr);
  const auto mem_alloc = driver_fn<MemAlloc>("cuMemAlloc");
  const auto mem_free = driver_fn<MemFree>("cuMemFree");
  ASSERT_NE(mem_alloc, nullptr);
  ASSERT_NE(mem_free, nullptr);
  CUdeviceptr p = 0;
  AllocationDetector d;
  ASSERT_EQ(mem_alloc(&p, 1 << 20), CUDA_SUCCESS);
  const Detection r = d.finish();
  mem_free(p);
  EXPECT_TRUE(r.contains("cuMemAlloc")) << r.describe();
}

TEST_F(Detectors, AllocationCatchesHostNew) {
  AllocationDetector d;
  void* raw = ::operator new(64);
  g_sink = raw;
  ::operator delete(raw);
  std::string* s = new std::string(100, 'x');  // a new-expression and a string's buffer
  g_sink = s;
  delete s;
  const Detection r = d.finish();
  EXPECT_TRUE(r.contains("operator new")) << r.describe();
  EXPECT_TRUE(r.contains("operator delete")) << r.describe();
}

TEST_F(Detectors, HostHeapCountsOnlyTheArmedThread) {
  std::atomic<int> phase{0};  // 0: wait, 1: allocate now, 2: done
  std::thread other([&] {
    while (phase.load() == 0) std::this_thread::yield();
    int* p = new int[16];
    g_sink = p;
    delete[] p;
    phase.store(2);
  });
  AllocationDetector d;  // armed after the thread started: its creation allocated
  phase.store(1);
  while (phase.load() != 2) std::this_thread::yield();
  const Detection r = d.finish();
  other.join();
  EXPECT_FALSE(r.contains("operator new")) << r.describe();
}

// --- Planted synchronisation.

TEST_F(Detectors, SyncCatchesStreamSynchronize) {
  SyncDetector d;
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  const Detection r = d.finish();
  EXPECT_TRUE(r.contains("cudaStreamSynchronize")) << r.describe();
}

TEST_F(Detectors, SyncCatchesDeviceEventAndMemcpy) {
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreate(&event), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(event, stream_), cudaSuccess);
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 256), cudaSuccess);
  char host[256];
  SyncDetector d;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(event), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
  const cudaError_t q = cudaStreamQuery(stream_);
  const Detection r = d.finish();
  EXPECT_EQ(q, cudaSuccess);
  cudaFree(dev);
  cudaEventDestroy(event);
  for (const char* api :
       {"cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy", "cudaStreamQuery"}) {
    EXPECT_TRUE(r.contains(api)) << api << " not seen; seen: " << r.describe();
  }
}

TEST_F(Detectors, SyncCatchesDriverSynchronize) {
  using StreamSync = CUresult (*)(CUstream);
  using CtxSync = CUresult (*)();
  const auto stream_sync = driver_fn<StreamSync>("cuStreamSynchronize");
  const auto ctx_sync = driver_fn<CtxSync>("cuCtxSynchronize");
  ASSERT_NE(stream_sync, nullptr);
  ASSERT_NE(ctx_sync, nullptr);
  SyncDetector d;
  ASSERT_EQ(stream_sync(stream_), CUDA_SUCCESS);
  ASSERT_EQ(ctx_sync(), CUDA_SUCCESS);
  const Detection r = d.finish();
  EXPECT_TRUE(r.contains("cuStreamSynchronize")) << r.describe();
  EXPECT_TRUE(r.contains("cuCtxSynchronize")) << r.describe();
}

// --- No false alarms: asynchronous work inside, faults outside the scope.

TEST_F(Detectors, SilentForAsyncWorkAndOutsideTheirScope) {
  void* dev = nullptr;
  void* pinned = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 4096), cudaSuccess);  // before: not seen
  ASSERT_EQ(cudaMallocHost(&pinned, 4096), cudaSuccess);
  Detection a, s;
  {
    AllocationDetector alloc;
    SyncDetector sync;
    FLOE_ASSERT_OK(enqueue_spin(stream_, 0.01));
    ASSERT_EQ(cudaMemsetAsync(dev, 0, 4096, stream_), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(pinned, dev, 4096, cudaMemcpyDeviceToHost, stream_), cudaSuccess);
    a = alloc.finish();
    s = sync.finish();
  }
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);  // after: not seen
  cudaFree(dev);
  cudaFreeHost(pinned);
  EXPECT_TRUE(a.empty()) << a.describe();
  EXPECT_TRUE(s.empty()) << s.describe();
}

// --- The point: execute allocates nothing and synchronises nothing.

void expect_silent_execute(Direction dir) {
  const std::string engine = harness_settings().engine;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  int checked = 0;
  for (const NamedProblem& np : named_problems(dir)) {
    SCOPED_TRACE(np.name);
    Result<tool::Case> c = make_case(np.json, 7);
    FLOE_ASSERT_OK(c);
    Result<Plan> plan = build_plan(c->problem, tool::Memory::device, engine);
    if (declined_by_pinned_engine(plan)) continue;
    FLOE_ASSERT_OK(plan);
    Result<PreparedRun> run = PreparedRun::create(*c, *plan, tool::Memory::device);
    FLOE_ASSERT_OK(run);
    const Arguments args = run->arguments();
    for (int round = 0; round < 2; ++round) {  // the first execute (lazy loading) and a warm one
      Detection a, s;
      Status st;
      {
        AllocationDetector alloc;
        SyncDetector sync;
        st = run->plan().execute(args, run->workspace(), run->workspace_size(), stream);
        a = alloc.finish();  // first: the heap count stops before anything else allocates
        s = sync.finish();
      }
      FLOE_ASSERT_OK(st);
      EXPECT_TRUE(a.empty()) << plan->engine() << " execute allocated (round " << round
                             << "): " << a.describe();
      EXPECT_TRUE(s.empty()) << plan->engine() << " execute synchronised (round " << round
                             << "): " << s.describe();
    }
    Result<tool::ArrayMap> got = run->finish();
    FLOE_ASSERT_OK(got);
    expect_matches_reference("detectors-" + np.name, *c, *got);
    ++checked;
  }
  cudaStreamDestroy(stream);
  EXPECT_GT(checked, 0) << "engine " << engine << " declined every problem";
}

TEST_F(Detectors, SilentAroundForwardExecute) {
  expect_silent_execute(Direction::forward);
}

TEST_F(Detectors, SilentAroundBackwardExecute) {
  expect_silent_execute(Direction::backward);
}

}  // namespace
}  // namespace floe::test
