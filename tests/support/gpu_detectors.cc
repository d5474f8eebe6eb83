#include "support/gpu_detectors.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include "support/gpu_host_heap.h"

#if __has_include(<cupti.h>)
#include <cupti.h>
#define FLOE_HAVE_CUPTI_HEADER 1
#else
#define FLOE_HAVE_CUPTI_HEADER 0
#endif

namespace floe::test {

namespace {

// --- Which calls are what. string_view only: the CUPTI callback below classifies calls while
// the host heap is being counted, so it must not allocate.

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
bool has(std::string_view s, std::string_view p) {
  return s.find(p) != std::string_view::npos;
}

std::string_view normalize(std::string_view s) {
  for (bool changed = true; changed;) {
    changed = false;
    for (std::string_view suffix : {"_ptsz", "_ptds"}) {
      if (ends_with(s, suffix)) {
        s.remove_suffix(suffix.size());
        changed = true;
      }
    }
    // _v2, _v3020, ...: a version suffix
    size_t digits = 0;
    while (digits < s.size() && s[s.size() - 1 - digits] >= '0' &&
           s[s.size() - 1 - digits] <= '9') {
      ++digits;
    }
    if (digits > 0 && s.size() > digits + 2 && s[s.size() - 1 - digits] == 'v' &&
        s[s.size() - 2 - digits] == '_') {
      s.remove_suffix(digits + 2);
      changed = true;
    }
  }
  return s;
}

bool allocation_api(std::string_view n) {
  // Memory: device, pinned (host alloc/register), managed, pools, arrays, virtual memory;
  // their frees; and stream/event creation, which allocates driver resources.
  for (std::string_view p : {"cudaMalloc", "cudaFree", "cuMemAlloc", "cuMemFree"}) {
    if (starts_with(n, p)) return true;
  }
  for (std::string_view e : {"cudaHostAlloc",
                             "cudaHostRegister",
                             "cudaHostUnregister",
                             "cudaMemPoolCreate",
                             "cudaMallocHost",
                             "cudaStreamCreate",
                             "cudaStreamCreateWithFlags",
                             "cudaStreamCreateWithPriority",
                             "cudaEventCreate",
                             "cudaEventCreateWithFlags",
                             "cuMemCreate",
                             "cuMemRelease",
                             "cuMemMap",
                             "cuMemUnmap",
                             "cuMemAddressReserve",
                             "cuMemAddressFree",
                             "cuMemHostAlloc",
                             "cuMemHostRegister",
                             "cuMemHostUnregister",
                             "cuMemPoolCreate",
                             "cuArrayCreate",
                             "cuArray3DCreate",
                             "cuMipmappedArrayCreate",
                             "cuStreamCreate",
                             "cuStreamCreateWithPriority",
                             "cuEventCreate"}) {
    if (n == e) return true;
  }
  return false;
}

bool sync_api(std::string_view n) {
  for (std::string_view e :
       {"cudaDeviceSynchronize", "cudaThreadSynchronize", "cudaStreamSynchronize",
        "cudaEventSynchronize", "cudaStreamQuery", "cudaEventQuery", "cudaDeviceReset",
        "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "cuStreamQuery",
        "cuEventQuery"}) {
    if (n == e) return true;
  }
  // Copies and sets without Async block the host or serialise on the legacy default stream;
  // frees synchronise the device.
  for (std::string_view p :
       {"cudaMemcpy", "cudaMemset", "cuMemcpy", "cuMemset", "cudaFree", "cuMemFree"}) {
    if (starts_with(n, p) && !has(n, "Async")) return true;
  }
  return false;
}

enum Kind : unsigned { kAllocation = 1, kSync = 2 };

unsigned classify(std::string_view raw) {
  const std::string_view n = normalize(raw);
  return (allocation_api(n) ? kAllocation : 0u) | (sync_api(n) ? kSync : 0u);
}

// --- The event log the CUPTI callback appends to while a detector is armed.

struct Event {
  const char* name;  // CUPTI's: a global constant string
  unsigned kinds;
};
constexpr unsigned kLogSize = 4096;
Event g_log[kLogSize];
std::atomic<unsigned> g_next{0};
std::atomic<int> g_armed_alloc{0};
std::atomic<int> g_armed_sync{0};

unsigned arm(std::atomic<int>& counter) {
  if (g_armed_alloc.load() + g_armed_sync.load() == 0) g_next.store(0);
  const unsigned start = g_next.load();
  counter.fetch_add(1);
  return start;
}

void collect(unsigned start, unsigned kind, Detection* d) {
  const unsigned end = g_next.load();
  for (unsigned i = start; i < end && i < kLogSize; ++i) {
    if (g_log[i].kinds & kind) d->calls.emplace_back(normalize(g_log[i].name));
  }
  if (end > kLogSize) d->calls.emplace_back("(detector log overflow: more calls were made)");
}

#if FLOE_HAVE_CUPTI_HEADER

void CUPTIAPI on_api_call(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const unsigned armed = (g_armed_alloc.load(std::memory_order_relaxed) > 0 ? kAllocation : 0u) |
                         (g_armed_sync.load(std::memory_order_relaxed) > 0 ? kSync : 0u);
  if (armed == 0) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cb->callbackSite != CUPTI_API_ENTER || cb->functionName == nullptr) return;
  const unsigned kinds = classify(cb->functionName) & armed;
  if (kinds == 0) return;
  const unsigned i = g_next.fetch_add(1);
  if (i < kLogSize) g_log[i] = Event{cb->functionName, kinds};
}

using SubscribeFn = CUptiResult (*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);
using EnableDomainFn = CUptiResult (*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
using ResultStringFn = CUptiResult (*)(CUptiResult, const char**);

void* open_cupti(std::string* tried) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("FLOE_CUPTI_LIBRARY")) candidates.emplace_back(env);
  candidates.insert(candidates.end(), {"libcupti.so", "libcupti.so.13", "libcupti.so.12"});
  // Beside the CUDA runtime this binary loaded, and in the toolkit's extras folder.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudaGetDeviceCount), &info) != 0 && info.dli_fname) {
    std::string dir = info.dli_fname;
    dir = dir.substr(0, dir.find_last_of('/'));
    candidates.push_back(dir + "/libcupti.so");
    candidates.push_back(dir + "/../extras/CUPTI/lib64/libcupti.so");
  }
  const char* roots[] = {std::getenv("CUDA_HOME"), std::getenv("CUDA_PATH"), "/usr/local/cuda"};
  for (const char* root : roots) {
    if (root == nullptr) continue;
    for (const char* sub : {"/extras/CUPTI/lib64/libcupti.so", "/lib64/libcupti.so",
                            "/targets/x86_64-linux/lib/libcupti.so"}) {
      candidates.push_back(std::string(root) + sub);
    }
  }
  for (const std::string& c : candidates) {
    if (void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    *tried += (tried->empty() ? "" : ", ") + c;
  }
  return nullptr;
}

Status install() {
  std::string tried;
  void* lib = open_cupti(&tried);
  if (lib == nullptr) {
    return Status(Code::internal, "CUPTI: libcupti.so not found (tried " + tried +
                                      "; set FLOE_CUPTI_LIBRARY or LD_LIBRARY_PATH)");
  }
  auto subscribe = reinterpret_cast<SubscribeFn>(dlsym(lib, "cuptiSubscribe"));
  auto enable = reinterpret_cast<EnableDomainFn>(dlsym(lib, "cuptiEnableDomain"));
  auto result_string = reinterpret_cast<ResultStringFn>(dlsym(lib, "cuptiGetResultString"));
  if (!subscribe || !enable) return Status(Code::internal, "CUPTI: cuptiSubscribe not exported");
  auto fail = [&](const char* what, CUptiResult r) {
    const char* msg = "?";
    if (result_string) result_string(r, &msg);
    return Status(Code::internal, std::string("CUPTI: ") + what + ": " + msg +
                                      " (is a profiler or compute-sanitizer attached?)");
  };
  CUpti_SubscriberHandle subscriber = nullptr;
  if (CUptiResult r = subscribe(&subscriber, &on_api_call, nullptr); r != CUPTI_SUCCESS) {
    return fail("cuptiSubscribe", r);
  }
  for (CUpti_CallbackDomain d : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API}) {
    if (CUptiResult r = enable(1, subscriber, d); r != CUPTI_SUCCESS) {
      return fail("cuptiEnableDomain", r);
    }
  }
  return Status();
}

#else

Status install() {
  return Status(Code::internal,
                "CUPTI: cupti.h was not found when the tests were built; give floe_test_support "
                "the CUPTI include folder (CUDA::cupti)");
}

#endif

const Status& installed() {
  static const Status status = install();  // once: CUPTI allows one subscriber
  return status;
}

void add_unavailable(Detection* d) {
  d->calls.push_back("detector unavailable: " + installed().message());
}

}  // namespace

bool Detection::contains(const std::string& api) const {
  for (const std::string& c : calls) {
    if (c == api) return true;
  }
  return false;
}

std::string Detection::describe() const {
  if (calls.empty()) return "none";
  std::vector<std::pair<std::string, int>> counted;
  for (const std::string& c : calls) {
    bool found = false;
    for (auto& [name, n] : counted) {
      if (name == c) {
        ++n;
        found = true;
      }
    }
    if (!found) counted.emplace_back(c, 1);
  }
  std::string s;
  for (const auto& [name, n] : counted) {
    s += (s.empty() ? "" : ", ") + name + (n > 1 ? " x" + std::to_string(n) : "");
  }
  return s;
}

Status detectors_available() {
  return installed();
}

bool is_allocation_api(const std::string& name) {
  return classify(name) & kAllocation;
}
bool is_sync_api(const std::string& name) {
  return classify(name) & kSync;
}
std::string normalize_api_name(const std::string& name) {
  return std::string(normalize(name));
}

AllocationDetector::AllocationDetector() {
  if (!installed().ok()) return;
  armed_ = true;
  start_ = arm(g_armed_alloc);
  heap::begin();  // last: nothing above may count
}

AllocationDetector::~AllocationDetector() {
  if (armed_) finish();
}

Detection AllocationDetector::finish() {
  Detection d;
  if (!armed_) {
    add_unavailable(&d);
    return d;
  }
  const heap::Counts counts = heap::end();  // first: nothing below may count
  g_armed_alloc.fetch_sub(1);
  armed_ = false;
  collect(start_, kAllocation, &d);
  for (size_t i = 0; i < counts.allocations && i < 1000; ++i) d.calls.emplace_back("operator new");
  for (size_t i = 0; i < counts.deallocations && i < 1000; ++i)
    d.calls.emplace_back("operator delete");
  return d;
}

SyncDetector::SyncDetector() {
  if (!installed().ok()) return;
  armed_ = true;
  start_ = arm(g_armed_sync);
}

SyncDetector::~SyncDetector() {
  if (armed_) finish();
}

Detection SyncDetector::finish() {
  Detection d;
  if (!armed_) {
    add_unavailable(&d);
    return d;
  }
  g_armed_sync.fetch_sub(1);
  armed_ = false;
  collect(start_, kSync, &d);
  return d;
}

}  // namespace floe::test
