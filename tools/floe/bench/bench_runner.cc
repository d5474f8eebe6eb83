#include "bench_runner.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

namespace floe::tool {

namespace {

Status cuda_status(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return Status();
  cudaGetLastError();  // clears the error unless it is sticky
  return Status(Code::device_error, what + ": " + cudaGetErrorString(err));
}

struct CudaFree {
  void operator()(void* p) const {
    if (p != nullptr) cudaFree(p);
  }
};
using DeviceMemory = std::unique_ptr<void, CudaFree>;

Status device_alloc(size_t bytes, const std::string& what, DeviceMemory* out) {
  out->reset();
  if (bytes == 0) return Status();
  void* p = nullptr;
  if (Status st = cuda_status(cudaMalloc(&p, bytes),
                              "cudaMalloc of " + std::to_string(bytes) + " bytes for " + what);
      !st) {
    return st;
  }
  out->reset(p);
  return Status();
}

size_t align_up(size_t n, size_t a) {
  return (n + a - 1) / a * a;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Roughly N(0, 1), the distribution the peers' torch.randn inputs have: the sum of four
// uniforms, centred and scaled (Irwin-Hall). Cheap: the pool below holds 16M of them.
float normalish(uint64_t& state) {
  uint64_t r = splitmix64(state);
  float sum = 0;
  for (int i = 0; i < 4; ++i, r >>= 16) sum += static_cast<float>(r & 0xFFFF) / 65536.f;
  return (sum - 2.f) * 1.7320508f;  // variance 4/12 -> 1
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Round to nearest even. The values come from normalish(): finite and below 4 in magnitude,
// so no NaN, infinity or overflow handling; values too small for a normal f16 become zero.
uint16_t to_bf16(float f) {
  const uint32_t u = bits_of(f);
  return static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}
uint16_t to_f16(float f) {
  const uint32_t u = bits_of(f);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const int exp = static_cast<int>((u >> 23) & 0xFF) - 127 + 15;
  if (exp <= 0) return sign;
  const uint32_t mant = u & 0x7FFFFF;
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // a carry moves into the exponent
  return static_cast<uint16_t>(sign | h);
}

// Element offsets of each declared tensor and of the workspace in one input set's block.
struct SetLayout {
  std::array<size_t, kTensorCount> offset{};
  size_t workspace_offset = 0;
  size_t total = 0;
};

SetLayout layout_of(const Problem& p, size_t workspace_bytes) {
  SetLayout l;
  size_t cursor = 0;
  for (int i = 0; i < kTensorCount; ++i) {
    const auto id = static_cast<TensorId>(i);
    if (!p.has(id)) continue;
    l.offset[i] = cursor = align_up(cursor, kWorkspaceAlignment);
    cursor += p.tensor(id)->span_bytes();
  }
  l.workspace_offset = cursor = align_up(cursor, kWorkspaceAlignment);
  l.total = align_up(cursor + workspace_bytes, kWorkspaceAlignment);
  return l;
}

// One full copy of a problem's memory: every tensor and the workspace in one allocation.
struct InputSet {
  DeviceMemory block;
  Arguments args;      // for the plan under test
  Arguments fwd_args;  // backward: for the forward that writes O and stats
  void* workspace = nullptr;
};

// The inputs a run reads; for a backward, O and stats come from running the forward.
bool is_random_input(TensorId id, Direction dir) {
  switch (id) {
    case TensorId::q:
    case TensorId::k:
    case TensorId::v:
    case TensorId::bias:
    case TensorId::sink:
      return true;
    case TensorId::d_o:
      return dir == Direction::backward;
    default:
      return false;
  }
}

// "  NAME: declined: why" from a build failure's verdict lines; the whole message otherwise.
std::string decline_reason(const std::string& message, const std::string& engine) {
  if (engine != "auto") {
    const std::string key = "  " + engine + ": declined: ";
    const size_t at = message.find(key);
    if (at != std::string::npos) {
      const size_t from = at + key.size();
      return message.substr(from, message.find('\n', from) - from);
    }
  }
  return message;
}

}  // namespace

// Instantiated CUDA graphs, destroyed with this.
class Graphs {
 public:
  Graphs() = default;
  Graphs(const Graphs&) = delete;
  Graphs& operator=(const Graphs&) = delete;
  ~Graphs() {
    for (cudaGraphExec_t e : execs_) cudaGraphExecDestroy(e);
  }

  // Captures what `record` enqueues on `stream` (thread-local capture mode) as one more graph.
  template <class F>
  Status capture(cudaStream_t stream, F&& record) {
    if (Status st = cuda_status(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                                "cudaStreamBeginCapture");
        !st) {
      return st;
    }
    const Status recorded = record();
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    if (!recorded) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      return recorded;
    }
    if (Status st = cuda_status(ended, "cudaStreamEndCapture"); !st) return st;
    cudaGraphExec_t exec = nullptr;
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (Status st = cuda_status(inst, "cudaGraphInstantiate"); !st) return st;
    execs_.push_back(exec);
    return Status();
  }

  Status launch(size_t i, cudaStream_t stream) const {
    return cuda_status(cudaGraphLaunch(execs_[i], stream), "cudaGraphLaunch");
  }

 private:
  std::vector<cudaGraphExec_t> execs_;
};

struct BenchRunner::Impl {
  BenchSettings settings;
  Target target;
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> events;
  // 16M random values per 16-bit dtype, generated once; tensors copy windows of it.
  std::vector<uint16_t> pool_bf16, pool_f16;

  ~Impl() {
    for (cudaEvent_t e : events) cudaEventDestroy(e);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  const std::vector<uint16_t>& pool(DType dtype) {
    std::vector<uint16_t>& pool = dtype == DType::f16 ? pool_f16 : pool_bf16;
    if (pool.empty()) {
      constexpr size_t kPool = size_t{1} << 24;
      pool.resize(kPool);
      uint64_t state = settings.seed;
      for (uint16_t& x : pool) {
        const float f = normalish(state);
        x = dtype == DType::f16 ? to_f16(f) : to_bf16(f);
      }
    }
    return pool;
  }

  // Random values over a tensor's whole span (stride gaps included: nothing reads them).
  // 16-bit tensors copy a window of the pool starting at a place that `salt` picks, wrapping
  // around; f32 tensors (the sink) are small and drawn directly.
  Status fill(void* dst, const TensorDesc& desc, uint64_t salt) {
    const auto n = static_cast<size_t>(desc.span());
    if (desc.dtype == DType::f32) {
      std::vector<float> host(n);
      uint64_t state = settings.seed ^ (salt * 0xD1B54A32D192ED03ull);
      for (float& x : host) x = normalish(state);
      return cuda_status(cudaMemcpy(dst, host.data(), n * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    const std::vector<uint16_t>& src = pool(desc.dtype);
    uint64_t state = settings.seed + salt;
    size_t start = splitmix64(state) % src.size();
    auto* out = static_cast<uint16_t*>(dst);
    for (size_t done = 0; done < n;) {
      const size_t len = std::min(n - done, src.size() - start);
      if (Status st = cuda_status(
              cudaMemcpy(out + done, src.data() + start, len * 2, cudaMemcpyHostToDevice),
              "cudaMemcpy");
          !st) {
        return st;
      }
      done += len;
      start = 0;
    }
    return Status();
  }

  Status make_set(const Problem& p, const SetLayout& layout, const Problem* fwd,
                  const std::vector<std::pair<TensorId, std::vector<int32_t>>>& ints, int index,
                  InputSet* set) {
    if (Status st = device_alloc(layout.total, "input set " + std::to_string(index), &set->block);
        !st) {
      return st;
    }
    auto* base = static_cast<unsigned char*>(set->block.get());
    // Outputs, stride gaps and the workspace start at zero.
    if (Status st = cuda_status(cudaMemset(base, 0, layout.total), "cudaMemset"); !st) return st;
    for (int i = 0; i < kTensorCount; ++i) {
      const auto id = static_cast<TensorId>(i);
      if (!p.has(id)) continue;
      void* ptr = base + layout.offset[i];
      set->args.set(id, ptr);
      if (fwd != nullptr && fwd->has(id)) set->fwd_args.set(id, ptr);
      if (is_random_input(id, p.direction())) {
        if (Status st = fill(ptr, *p.tensor(id), static_cast<uint64_t>(index) * 64 + i); !st) {
          return st;
        }
      }
    }
    // Offsets, lengths and block tables: the same host-built values in every set, uploaded
    // here so that nothing of them is in the timed region.
    for (const auto& [id, values] : ints) {
      if (!p.has(id)) continue;
      const size_t bytes = values.size() * sizeof(int32_t);
      if (p.tensor(id)->dtype != DType::i32 || p.tensor(id)->span_bytes() != bytes) {
        return Status(Code::internal, std::string("bench: host values for ") + to_string(id) +
                                          " do not match its declaration");
      }
      if (Status st = cuda_status(cudaMemcpy(base + layout.offset[index_of(id)], values.data(),
                                             bytes, cudaMemcpyHostToDevice),
                                  "cudaMemcpy");
          !st) {
        return st;
      }
    }
    set->workspace = base + layout.workspace_offset;
    // cudaMemset and pageable cudaMemcpy run on the legacy default stream and may still be in
    // flight; `stream` is non-blocking and would not wait for them.
    return cuda_status(cudaDeviceSynchronize(), "input set " + std::to_string(index));
  }

  cudaEvent_t event(size_t i) {
    while (events.size() <= i) {
      cudaEvent_t e = nullptr;
      if (cudaEventCreate(&e) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
      }
      events.push_back(e);
    }
    return events[i];
  }

  // ms between events a and b (recorded, then synchronised).
  Status elapsed(cudaEvent_t a, cudaEvent_t b, double* ms) {
    float f = 0;
    if (Status st = cuda_status(cudaEventElapsedTime(&f, a, b), "cudaEventElapsedTime"); !st) {
      return st;
    }
    *ms = f;
    return Status();
  }

  Status sync(const char* what) {
    if (Status st = cuda_status(cudaStreamSynchronize(stream), what); !st) return st;
    return cuda_status(cudaGetLastError(), what);
  }

  // Builds the plan (and, for a backward, the forward that feeds it) and `count` input sets
  // (0: as many as keep the sets out of L2). Declines land in m, errors in the Status.
  Status prepare(const BenchProblem& bp, Direction dir, const std::string& engine, int count,
                 std::optional<Plan>* plan, std::vector<InputSet>* sets, Measurement* m) {
    const Problem p = make_problem(bp, dir);
    Result<Plan> built = Plan::build(p, target, PlanOptions{engine});
    if (!built) {
      if (built.status().code() != Code::not_supported) return built.status();
      m->status = "declined";
      m->reason = decline_reason(built.status().message(), engine);
      return Status();
    }
    plan->emplace(std::move(built.value()));
    m->engine = (*plan)->engine();
    m->workspace_bytes = (*plan)->workspace_bytes();

    std::optional<Problem> fwd_problem;
    std::optional<Plan> fwd_plan;
    DeviceMemory fwd_workspace;
    if (dir == Direction::backward) {
      fwd_problem = make_problem(bp, Direction::forward);
      Result<Plan> f = Plan::build(*fwd_problem, target);
      if (!f)
        return Status(f.status().code(), "the forward (for O and stats): " + f.status().message());
      fwd_plan.emplace(std::move(f.value()));
      if (Status st =
              device_alloc(fwd_plan->workspace_bytes(), "the forward's workspace", &fwd_workspace);
          !st) {
        return st;
      }
    }

    const SetLayout layout = layout_of(p, m->workspace_bytes);
    m->working_set_bytes = layout.total;
    if (count <= 0) {
      count = 1;
      if (layout.total < kL2Bytes) {
        // Each set comes back after the others have passed through L2 at least twice.
        const size_t want = (3 * kL2Bytes + layout.total - 1) / layout.total;
        count = static_cast<int>(std::clamp<size_t>(want, 2, 256));
      }
    }
    m->input_sets = count;
    sets->resize(static_cast<size_t>(count));
    const std::vector<std::pair<TensorId, std::vector<int32_t>>> ints = serving_inputs(bp);
    for (int i = 0; i < count; ++i) {
      InputSet& set = (*sets)[static_cast<size_t>(i)];
      if (Status st = make_set(p, layout, fwd_problem ? &*fwd_problem : nullptr, ints, i, &set);
          !st) {
        return st;
      }
      if (fwd_plan) {
        if (Status st = fwd_plan->execute(set.fwd_args, fwd_workspace.get(),
                                          fwd_plan->workspace_bytes(), stream);
            !st) {
          return Status(st.code(), "the forward (for O and stats): " + st.message());
        }
      }
    }
    // The forward's workspace goes when this returns: wait for the forwards that use it.
    return sync("input sets");
  }

  Status measure(const BenchProblem& bp, Direction dir, const std::string& engine, Measurement* m) {
    std::optional<Plan> plan;
    std::vector<InputSet> sets;
    if (Status st = prepare(bp, dir, engine, 0, &plan, &sets, m); !st || !plan) return st;
    const size_t ws = plan->workspace_bytes();
    // Decodes: one graph per input set, captured here, outside the timed region.
    Graphs graphs;
    if (bp.decode() && settings.graph) {
      for (const InputSet& s : sets) {
        if (Status st = graphs.capture(
                stream, [&]() { return plan->execute(s.args, s.workspace, ws, stream); });
            !st) {
          return st;
        }
      }
      m->graph = true;
    }
    size_t call = 0;
    auto execute = [&]() {
      const size_t i = call++ % sets.size();
      if (m->graph) return graphs.launch(i, stream);
      const InputSet& s = sets[i];
      return plan->execute(s.args, s.workspace, ws, stream);
    };
    cudaEvent_t a = event(0), b = event(1);
    if (a == nullptr || b == nullptr) return Status(Code::device_error, "cudaEventCreate failed");

    // Warm-ups, each timed on its own: the latest one estimates a call. The first pays for
    // module loading and cold caches, so a slow engine is judged from the second on.
    double estimate = 0;
    for (int w = 0; w < settings.warmups; ++w) {
      cudaEventRecord(a, stream);
      if (Status st = execute(); !st) return st;
      cudaEventRecord(b, stream);
      if (Status st = sync("warm-up"); !st) return st;
      if (Status st = elapsed(a, b, &estimate); !st) return st;
      ++m->warmups;
      const int left = settings.warmups - w - 1;
      if (w >= 1 && estimate * (left + settings.calls) > settings.budget_ms) break;
    }
    int calls = settings.calls;
    if (estimate > 0 && estimate * calls > settings.budget_ms) {
      calls = std::max(kMinCalls, static_cast<int>(settings.budget_ms / estimate));
      calls = std::min(calls, settings.calls);
    }

    // The timed calls: back to back, with no sync between, each between its own events.
    for (int i = 0; i < calls; ++i) {
      cudaEvent_t start = event(2 * static_cast<size_t>(i));
      cudaEvent_t stop = event(2 * static_cast<size_t>(i) + 1);
      if (start == nullptr || stop == nullptr) {
        return Status(Code::device_error, "cudaEventCreate failed");
      }
      cudaEventRecord(start, stream);
      if (Status st = execute(); !st) return st;
      cudaEventRecord(stop, stream);
    }
    if (Status st = sync("timed calls"); !st) return st;
    m->ms.resize(static_cast<size_t>(calls));
    for (int i = 0; i < calls; ++i) {
      if (Status st =
              elapsed(events[2 * static_cast<size_t>(i)], events[2 * static_cast<size_t>(i) + 1],
                      &m->ms[static_cast<size_t>(i)]);
          !st) {
        return st;
      }
    }
    m->median_ms = median_of(m->ms);
    m->min_ms = *std::min_element(m->ms.begin(), m->ms.end());
    return Status();
  }

  Status host_overhead(const BenchProblem& bp, Direction dir, int calls, HostOverhead* h) {
    std::optional<Plan> plan;
    std::vector<InputSet> sets;
    Measurement m;
    if (Status st = prepare(bp, dir, "auto", 1, &plan, &sets, &m); !st) return st;
    if (!plan) return Status(Code::not_supported, m.reason);
    h->engine = plan->engine();
    const InputSet& s = sets.front();
    const size_t ws = plan->workspace_bytes();
    for (int i = 0; i < 10; ++i) {
      if (Status st = plan->execute(s.args, s.workspace, ws, stream); !st) return st;
    }
    if (Status st = sync("host overhead warm-up"); !st) return st;
    std::vector<double> us(static_cast<size_t>(calls));
    for (double& t : us) {
      const auto t0 = std::chrono::steady_clock::now();
      const Status st = plan->execute(s.args, s.workspace, ws, stream);
      const auto t1 = std::chrono::steady_clock::now();
      if (!st) return st;
      t = std::chrono::duration<double, std::micro>(t1 - t0).count();
    }
    if (Status st = sync("host overhead"); !st) return st;
    h->calls = calls;
    h->median_us = median_of(us);
    h->min_us = *std::min_element(us.begin(), us.end());
    return Status();
  }
};

Result<std::unique_ptr<BenchRunner>> BenchRunner::create(const BenchSettings& settings) {
  if (!cuda_available()) {
    return Status(Code::device_error, "no CUDA device: floe bench times GPU engines");
  }
  Result<Target> target = Target::cuda();
  if (!target) return target.status();
  if (settings.smem_limit_kb > 0) {
    target->smem_per_block_optin =
        std::min(target->smem_per_block_optin, static_cast<size_t>(settings.smem_limit_kb) * 1024);
  }
  std::unique_ptr<BenchRunner> r(new BenchRunner());
  r->impl_ = std::make_unique<Impl>();
  r->impl_->settings = settings;
  r->impl_->target = *target;
  if (Status st = cuda_status(cudaStreamCreateWithFlags(&r->impl_->stream, cudaStreamNonBlocking),
                              "cudaStreamCreate");
      !st) {
    return st;
  }
  cudaDeviceProp prop{};
  if (Status st =
          cuda_status(cudaGetDeviceProperties(&prop, target->device), "cudaGetDeviceProperties");
      !st) {
    return st;
  }
  r->device_.name = prop.name;
  if (settings.smem_limit_kb > 0) {
    // The records must not pass for the device's own tiles.
    r->device_.name += " (planned for " + std::to_string(settings.smem_limit_kb) +
                       " KB of shared memory per block)";
  }
  r->device_.arch = target->arch;
  r->device_.sm_count = target->sm_count;
  cudaRuntimeGetVersion(&r->device_.runtime_version);
  cudaDriverGetVersion(&r->device_.driver_version);
  return Result<std::unique_ptr<BenchRunner>>(std::move(r));
}

BenchRunner::~BenchRunner() = default;

Measurement BenchRunner::measure(const BenchProblem& bp, Direction dir, const std::string& engine) {
  Measurement m;
  if (Status st = impl_->measure(bp, dir, engine, &m); !st) {
    m.status = "error";
    m.reason = std::string(to_string(st.code())) + ": " + st.message();
    m.ms.clear();
    m.median_ms = m.min_ms = 0;
  }
  return m;
}

HostOverhead BenchRunner::host_overhead(const BenchProblem& bp, Direction dir, int calls) {
  HostOverhead h;
  if (Status st = impl_->host_overhead(bp, dir, calls, &h); !st) {
    h.status = "error";
    h.reason = std::string(to_string(st.code())) + ": " + st.message();
  }
  return h;
}

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace floe::tool
