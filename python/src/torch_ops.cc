// floe._floe_torch: the per-call path of floe's eager torch ops (floe/_ops.py) in C++, over
// torch's C++ API. Optional: built only against the torch importable when the package is built
// (its C++ ABI is that torch's), and floe/_ops.py runs its Python path where this module is
// absent or was built for another torch.
//
// It serves plan-cache hits only, for the eager calls with no bias, sink or lengths: the key
// from the tensors' sizes, strides, dtypes and device, the outputs and the workspace from torch's
// caching allocator on the current stream, and the execute of a plan that _floe built, reached
// through c_api.h. Python's LRU (floe/_ops.py) stays the one cache: each entry here points at
// one of its entries ([plan, tick]), stamps its tick on a hit, and is dropped once Python has
// evicted it (the entry's plan is then None). A miss returns None and Python takes over: it
// finds or builds the plan and hands its entry back (remember_fwd / remember_bwd).
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/Allocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/python_variable.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>

#include "c_api.h"

namespace nb = nanobind;

namespace {

const floe_py::CApi* api = nullptr;
PyObject* tick_counter = nullptr;  // the Python LRU's clock (itertools.count)
size_t max_entries = 1024;
uint64_t hits = 0;

// Sizes and strides of every tensor of a call, dtypes and device: everything of the plan that
// the tensors decide; the options tuple (_ops._options) holds the rest.
struct Key {
  std::array<int64_t, 48> dims{};
  std::array<int8_t, 6> dtypes{};
  int8_t device_type = 0;
  int8_t device_index = 0;
  int8_t kind = 0;  // 0: forward without LSE, 1: forward with, 2: backward
  PyObject* options = nullptr;
  Py_hash_t options_hash = 0;

  bool operator==(const Key& o) const {
    if (dims != o.dims || dtypes != o.dtypes || device_type != o.device_type ||
        device_index != o.device_index || kind != o.kind || options_hash != o.options_hash) {
      return false;
    }
    if (options == o.options) return true;
    const int eq = PyObject_RichCompareBool(options, o.options, Py_EQ);
    if (eq < 0) PyErr_Clear();
    return eq == 1;
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](uint64_t x) { h = (h ^ x) * 1099511628211ull; };
    for (int64_t d : k.dims) mix(static_cast<uint64_t>(d));
    int64_t small = 0;
    std::memcpy(&small, k.dtypes.data(), 6);
    mix(static_cast<uint64_t>(small) ^ (uint64_t(uint8_t(k.device_type)) << 48) ^
        (uint64_t(uint8_t(k.device_index)) << 56));
    mix(static_cast<uint64_t>(k.kind));
    mix(static_cast<uint64_t>(k.options_hash));
    return static_cast<size_t>(h);
  }
};

struct Entry {
  PyObject* list;  // Python's [plan, tick]
  PyObject* plan;
  const void* raw;
  size_t workspace_bytes;
  uint64_t used;
};

std::unordered_map<Key, Entry, KeyHash>& cache() {
  static auto* map = new std::unordered_map<Key, Entry, KeyHash>();  // never destroyed: exit
  return *map;
}
uint64_t clock_ = 0;

void release(const Key& key, Entry& e) {
  Py_DECREF(key.options);
  Py_DECREF(e.list);
  Py_DECREF(e.plan);
}

// A tensor this path serves: a plain strided CPU or CUDA tensor of torch's own class, no
// subclass, functorch wrapper or functional tensor (those take the dispatcher's path).
bool plain_tensor(const at::Tensor& t, int rank) {
  if (!t.defined() || t.dim() != rank || t.layout() != c10::kStrided) return false;
  static const c10::DispatchKeySet wrapped(
      {c10::DispatchKey::Python, c10::DispatchKey::FuncTorchBatched,
       c10::DispatchKey::FuncTorchGradWrapper, c10::DispatchKey::Functionalize});
  return !t.key_set().has_any(wrapped);
}

const at::Tensor* plain(PyObject* obj, int rank) {
  if (!THPVariable_CheckExact(obj)) return nullptr;
  const at::Tensor& t = THPVariable_Unpack(obj);
  return plain_tensor(t, rank) ? &t : nullptr;
}

bool modes_active() {
  return c10::impl::TorchDispatchModeTLS::stack_len() > 0 ||
         c10::impl::tls_local_dispatch_key_set().included_.has(
             c10::DispatchKey::FuncTorchDynamicLayerFrontMode);
}

int8_t dtype_code(const at::Tensor& t) {
  return static_cast<int8_t>(t.scalar_type());
}

// Fills key from the tensors (q, k, v first, then any others); false where this path does
// not serve them (then Python does, and raises what is wrong with them).
bool make_key(Key& key, const at::Tensor* const* ts, int n, PyObject* options, int kind) {
  const c10::Device dev = ts[0]->device();
  if (!dev.is_cuda() && !dev.is_cpu()) return false;
  size_t at = 0;
  for (int i = 0; i < n; ++i) {
    const at::Tensor& t = *ts[i];
    if (t.device() != dev) return false;
    const auto sizes = t.sizes();
    const auto strides = t.strides();
    for (size_t r = 0; r < sizes.size(); ++r) {
      key.dims[at++] = sizes[r];
      key.dims[at++] = strides[r];
    }
    key.dtypes[i] = dtype_code(t);
  }
  key.device_type = static_cast<int8_t>(dev.type());
  key.device_index = dev.index();
  key.kind = static_cast<int8_t>(kind);
  key.options = options;
  // The common calls pass one remembered tuple (_ops._SIMPLE_OPTIONS): its hash is kept (a
  // tuple's is not cached by Python). The reference keeps the address from being reused.
  static PyObject* last_options = nullptr;
  static Py_hash_t last_hash = -1;
  if (options != last_options) {
    const Py_hash_t h = PyObject_Hash(options);
    if (h == -1) {
      PyErr_Clear();
      return false;
    }
    Py_INCREF(options);
    Py_XDECREF(last_options);
    last_options = options;
    last_hash = h;
  }
  key.options_hash = last_hash;
  return true;
}

// The live entry for key, its Python tick stamped; nullptr on a miss (an entry Python evicted
// is dropped here).
Entry* lookup(const Key& key) {
  auto& map = cache();
  auto it = map.find(key);
  if (it == map.end()) return nullptr;
  Entry& e = it->second;
  if (PyList_GET_ITEM(e.list, 0) != e.plan) {
    Key old = it->first;
    release(old, e);
    map.erase(it);
    return nullptr;
  }
  PyObject* tick = PyIter_Next(tick_counter);
  if (tick == nullptr) return nullptr;
  PyList_SetItem(e.list, 1, tick);  // steals tick, drops the old one
  e.used = ++clock_;
  ++hits;
  return &e;
}

void remember(Key& key, PyObject* list) {
  if (!PyList_CheckExact(list) || PyList_GET_SIZE(list) != 2) return;
  PyObject* plan = PyList_GET_ITEM(list, 0);
  const void* raw = api->plan_of(plan);
  if (raw == nullptr) return;  // a refusal: Python raises it again each time
  auto& map = cache();
  auto it = map.find(key);
  if (it != map.end()) {
    Key old = it->first;
    release(old, it->second);
    map.erase(it);
  }
  if (map.size() >= max_entries) {
    // Python's evictions first (entries whose plan is gone), then the least used of ours.
    for (auto i = map.begin(); i != map.end();) {
      if (PyList_GET_ITEM(i->second.list, 0) != i->second.plan) {
        Key old = i->first;
        release(old, i->second);
        i = map.erase(i);
      } else {
        ++i;
      }
    }
    while (map.size() >= max_entries) {
      auto oldest = map.begin();
      for (auto i = map.begin(); i != map.end(); ++i) {
        if (i->second.used < oldest->second.used) oldest = i;
      }
      Key old = oldest->first;
      release(old, oldest->second);
      map.erase(oldest);
    }
  }
  Py_INCREF(key.options);
  Py_INCREF(list);
  Py_INCREF(plan);
  map.emplace(key, Entry{list, plan, raw, api->workspace_bytes(raw), ++clock_});
}

void clear() {
  auto& map = cache();
  for (auto& [key, e] : map) release(key, e);
  map.clear();
  hits = 0;
}

// The allocator of torch's own CUDA tensors (the caching allocator, or the pluggable one that
// replaced it, which torch allows only before the first allocation), read off one tensor.
c10::Allocator* cuda_allocator(const at::Tensor& like) {
  static c10::Allocator* allocator = nullptr;
  if (allocator == nullptr) {
    const at::Tensor probe = at::empty({1}, like.options().dtype(at::kByte));
    allocator = probe.storage().allocator();
  }
  return allocator;
}

// torch's empty tensors on CUDA without the dispatcher's round trip: what at::empty_strided's
// CUDA kernel does (torch's allocator on the current device and stream; inside graph capture
// it serves the graph's pool), save its NaN fill under torch.use_deterministic_algorithms
// with fill_uninitialized_memory, which takes the dispatcher's path.
at::Tensor new_strided(const at::Tensor& like, at::IntArrayRef sizes, at::IntArrayRef strides,
                       at::ScalarType dtype) {
  if (like.is_cuda()) {
    c10::Allocator* cuda = cuda_allocator(like);
    const auto& ctx = at::globalContext();
    if (cuda != nullptr &&
        !(ctx.deterministicAlgorithms() && ctx.deterministicFillUninitializedMemory())) {
      return at::Tensor(at::detail::empty_strided_generic(
          sizes, strides, cuda, c10::DispatchKeySet(c10::DispatchKey::CUDA), dtype));
    }
  }
  return at::empty_strided(sizes, strides, like.options().dtype(dtype));
}

// torch.empty_like's layout rule: the operand's strides where it is dense, packed otherwise.
at::Tensor new_like(const at::Tensor& t) {
  if (t.is_non_overlapping_and_dense()) {
    return new_strided(t, t.sizes(), t.strides(), t.scalar_type());
  }
  return at::empty_like(t);
}

// Makes dev current for the call where it is not (the plan executes on its device and the
// allocator serves the current one); one cudaGetDevice where it is, as usual.
struct DeviceScope {
  std::optional<c10::DeviceGuard> guard;
  explicit DeviceScope(const c10::Device& dev) {
    if (dev.is_cuda() && c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getDevice() != dev) {
      guard.emplace(dev);
    }
  }
};

// The current stream of dev (CUDA), as the caching allocator sees it.
void* stream_of(const c10::Device& dev) {
  if (!dev.is_cuda()) return nullptr;
  return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(dev).native_handle();
}

// What a call needs of a cache entry, copied out of it: the entry may be dropped (by another
// thread's miss) while the CPU path runs with the GIL released.
struct Hit {
  const void* raw;
  size_t workspace_bytes;
  PyObject* plan;  // held by the caller for the call
};

Hit hit_of(const Entry& e) {
  return Hit{e.raw, e.workspace_bytes, e.plan};
}

// Allocates the workspace (kept alive in ws until the launch is queued: the caching allocator
// then reuses the block only in the current stream's order, as for any torch op), executes.
// GIL held.
bool stub = false;  // bench/python_node.py --stub: the execute replaced by nothing

bool run(const Hit& e, const at::Tensor& like, void* const* ptrs, int n) {
  const c10::Device dev = like.device();
  at::Tensor ws;
  void* ws_ptr = nullptr;
  const size_t bytes = e.workspace_bytes;
  const void* raw = e.raw;
  if (dev.is_cuda()) {
    if (bytes) {
      const int64_t n = static_cast<int64_t>(bytes);
      ws = new_strided(like, {n}, {1}, at::kByte);
      ws_ptr = ws.mutable_data_ptr();
    }
    // A launch holds the GIL: it only queues work (~4 us), less than releasing it costs others.
    if (!stub && api->execute(raw, ptrs, n, ws_ptr, bytes, stream_of(dev)) != 0) {
      api->raise_last();
      return false;
    }
    return true;
  }
  if (stub) return true;
  if (bytes) {  // the CPU allocator aligns to 64 bytes; floe wants 256
    ws = at::empty({static_cast<int64_t>(bytes) + 256}, like.options().dtype(at::kByte));
    ws_ptr = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws.mutable_data_ptr()) + 255) &
                                     ~uintptr_t(255));
  }
  // The reference engine computes here: other threads run meanwhile. The plan is held, so a
  // clear on another thread cannot free it under the call.
  PyObject* plan = e.plan;
  Py_INCREF(plan);
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = api->execute(raw, ptrs, n, ws_ptr, bytes, nullptr);
  Py_END_ALLOW_THREADS Py_DECREF(plan);
  if (rc != 0) {
    api->raise_last();
    return false;
  }
  return true;
}

void* in(const at::Tensor& t) {
  return const_cast<void*>(t.const_data_ptr());
}

bool forward_tensors(PyObject* q, PyObject* k, PyObject* v, bool enable_gqa,
                     const at::Tensor* ts[3]) {
  ts[0] = plain(q, 4);
  ts[1] = plain(k, 4);
  ts[2] = plain(v, 4);
  if (!ts[0] || !ts[1] || !ts[2] || modes_active()) return false;
  return enable_gqa || ts[0]->size(1) == ts[1]->size(1);
}

// The forward of a hit: o, and lse where stats; false with the Python error set.
bool forward_run(const Hit& hit, const at::Tensor& tq, const at::Tensor& tk, const at::Tensor& tv,
                 bool stats, at::Tensor& o, at::Tensor& lse) {
  const int64_t b = tq.size(0), h_q = tq.size(1), s_q = tq.size(2), d_v = tv.size(3);
  DeviceScope scope(tq.device());
  // o as [B, Sq, Hq, Dv] in memory (_ops._new_o); lse dense [B, Hq, Sq].
  o = new_strided(tq, {b, h_q, s_q, d_v}, {s_q * h_q * d_v, d_v, h_q * d_v, 1}, tq.scalar_type());
  if (stats) lse = new_strided(tq, {b, h_q, s_q}, {h_q * s_q, s_q, 1}, at::kFloat);
  void* ptrs[5] = {in(tq), in(tk), in(tv), o.mutable_data_ptr(),
                   stats ? lse.mutable_data_ptr() : nullptr};
  return run(hit, tq, ptrs, 5);
}

// The backward of a hit on ts = (q, k, v, o, d_o, lse), plain tensors, d_o of unit innermost
// stride: 1 with dq, dk, dv made; 0 on a miss (Python's); -1 with the Python error set.
int backward_hit(const at::Tensor* const ts[6], PyObject* options, at::Tensor& dq, at::Tensor& dk,
                 at::Tensor& dv) {
  Key key;
  if (!make_key(key, ts, 6, options, 2)) return 0;
  Entry* e = lookup(key);
  if (e == nullptr) return PyErr_Occurred() ? -1 : 0;
  const Hit hit = hit_of(*e);
  const at::Tensor &tq = *ts[0], &tk = *ts[1], &tv = *ts[2];
  DeviceScope scope(tq.device());
  // Each gradient in its operand's layout where that is dense (torch.empty_like's rule).
  dq = new_like(tq);
  dk = new_like(tk);
  dv = new_like(tv);
  void* ptrs[13] = {in(tq),
                    in(tk),
                    in(tv),
                    in(*ts[3]),
                    in(*ts[5]),
                    nullptr,
                    nullptr,
                    nullptr,
                    nullptr,
                    in(*ts[4]),
                    dq.mutable_data_ptr(),
                    dk.mutable_data_ptr(),
                    dv.mutable_data_ptr()};
  return run(hit, tq, ptrs, 13) ? 1 : -1;
}

// ---------------------------------------------------------------------------------------------
// The autograd node: a plain eager call with gradients (no bias, sink or lengths) whose forward
// plan is a hit records a C++ node (torch::autograd::Function) instead of floe/_ops.py's
// _EagerAttention (a Python autograd.Function): no Python frame on the forward, and autograd's
// engine runs the backward without entering Python on a hit (the GIL is taken for the cache's
// Python objects). A backward miss calls _ops._plain_backward, which builds the plan and hands
// the entry back. The same plans, launches and outputs as _EagerAttention's (tests/python).

bool node_enabled = false;
PyObject* backward_fallback = nullptr;  // _ops._plain_backward

// A Python reference that may be dropped on any thread: autograd frees nodes (and so their
// saved options) on its device threads, without the GIL.
struct PyRef : torch::CustomClassHolder {
  PyObject* obj;
  explicit PyRef(PyObject* o) : obj(o) {
    Py_INCREF(o);  // GIL held: made in the forward
  }
  ~PyRef() override {
#if PY_VERSION_HEX >= 0x030D0000
    const bool finalizing = Py_IsFinalizing();
#else
    const bool finalizing = _Py_IsFinalizing();
#endif
    if (!Py_IsInitialized() || finalizing) return;  // at exit: left to the process
    const PyGILState_STATE gil = PyGILState_Ensure();
    Py_DECREF(obj);
    PyGILState_Release(gil);
  }
};

// Thrown out of the node's forward (inside Function::apply) where the Python error is set.
struct PythonErrorSet {};

// The Python error set here, carried out of the node's backward as torch's python_error:
// autograd's engine rethrows it on the thread that called backward, which raises it there.
// (torch::throw_python_error does this in recent torch only.)
[[noreturn]] void throw_python_error() {
  python_error err;
  err.persist();
  throw std::move(err);
}

struct GilAcquire {
  PyGILState_STATE state = PyGILState_Ensure();
  ~GilAcquire() { PyGILState_Release(state); }
};

struct AttentionNode : torch::autograd::Function<AttentionNode> {
  // One gradient per argument of forward (autograd checks the count): dq, dk, dv, then none
  // for hit, options and return_lse.
  static constexpr int kArgs = 6;

  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const at::Tensor& q, const at::Tensor& k,
                                                const at::Tensor& v, const Hit& hit,
                                                PyObject* options, bool return_lse) {
    at::Tensor o, lse;
    if (!forward_run(hit, q, k, v, true, o, lse)) throw PythonErrorSet{};
    ctx->save_for_backward({q, k, v, o, lse});
    ctx->saved_data["options"] = at::IValue::make_capsule(c10::make_intrusive<PyRef>(options));
    if (!return_lse) return {o};
    ctx->mark_non_differentiable({lse});
    // The backward never reads d_lse: autograd need not make (and fill) a zero tensor for it.
    ctx->set_materialize_grads(false);
    return {o, lse};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &o = saved[3], &lse = saved[4];
    at::Tensor d_o = grads[0];
    // Not materialized with return_lse (see forward): o's gradient is zero.
    if (!d_o.defined()) d_o = at::zeros_like(o);
    PyObject* options = static_cast<PyRef*>(ctx->saved_data["options"].toCapsule().get())->obj;
    torch::autograd::variable_list out(kArgs);
    GilAcquire gil;
    const at::Tensor* ts[6] = {&q, &k, &v, &o, &d_o, &lse};
    int served = 0;
    // A d_o of non-unit innermost stride is made dense first (_ops._dense_d_o): Python's.
    if (plain_tensor(d_o, 4) && d_o.stride(3) == 1 && !modes_active()) {
      served = backward_hit(ts, options, out[0], out[1], out[2]);
    }
    if (served < 0) throw_python_error();
    if (served == 0) {
      PyObject* args[8] = {Py_None,
                           THPVariable_Wrap(d_o),
                           THPVariable_Wrap(q),
                           THPVariable_Wrap(k),
                           THPVariable_Wrap(v),
                           THPVariable_Wrap(o),
                           THPVariable_Wrap(lse),
                           options};
      bool wrapped = true;
      for (int i = 1; i < 7; ++i) wrapped = wrapped && args[i] != nullptr;
      PyObject* r = wrapped ? PyObject_Vectorcall(backward_fallback, args, 8, nullptr) : nullptr;
      for (int i = 1; i < 7; ++i) Py_XDECREF(args[i]);
      if (r == nullptr) throw_python_error();
      bool ok = PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 3;
      for (int i = 0; ok && i < 3; ++i) {
        PyObject* g = PyTuple_GET_ITEM(r, i);
        ok = THPVariable_Check(g);
        if (ok) out[i] = THPVariable_Unpack(g);
      }
      Py_DECREF(r);
      TORCH_CHECK(ok, "floe: _plain_backward returned no (dq, dk, dv)");
    }
    return out;
  }
};

// The gradient-recording call: the node's output (o, or (o, lse)), or None where Python must
// take the call (a miss, the node turned off).
PyObject* fwd_node(const at::Tensor& tq, const at::Tensor& tk, const at::Tensor& tv,
                   PyObject* options, bool stats) {
  if (!node_enabled || backward_fallback == nullptr) Py_RETURN_NONE;
  const at::Tensor* ts[3] = {&tq, &tk, &tv};
  Key key;
  // The plan with the LSE (kind 1): the backward reads it.
  if (!make_key(key, ts, 3, options, 1)) Py_RETURN_NONE;
  Entry* e = lookup(key);
  if (e == nullptr) {
    if (PyErr_Occurred()) return nullptr;
    Py_RETURN_NONE;
  }
  const Hit hit = hit_of(*e);
  torch::autograd::variable_list outs;
  try {
    outs = AttentionNode::apply(tq, tk, tv, hit, options, stats);
  } catch (const PythonErrorSet&) {
    return nullptr;
  }
  PyObject* po = THPVariable_Wrap(std::move(outs[0]));
  if (!stats || po == nullptr) return po;
  PyObject* pl = THPVariable_Wrap(std::move(outs[1]));
  if (pl == nullptr) {
    Py_DECREF(po);
    return nullptr;
  }
  PyObject* out = PyTuple_New(2);
  PyTuple_SET_ITEM(out, 0, po);
  PyTuple_SET_ITEM(out, 1, pl);
  return out;
}

// floe.attention's eager call (or _EagerAttention.forward's, where autograd has turned
// gradients off): o, or (o, lse) with stats; None where Python must take the call.
PyObject* fwd(PyObject* q, PyObject* k, PyObject* v, PyObject* options, bool stats,
              bool enable_gqa) {
  const at::Tensor* ts[3];
  if (!forward_tensors(q, k, v, enable_gqa, ts)) Py_RETURN_NONE;
  const at::Tensor &tq = *ts[0], &tk = *ts[1], &tv = *ts[2];
  if (c10::GradMode::is_enabled() &&
      (tq.requires_grad() || tk.requires_grad() || tv.requires_grad())) {
    return fwd_node(tq, tk, tv, options, stats);
  }
  Key key;
  if (!make_key(key, ts, 3, options, stats ? 1 : 0)) Py_RETURN_NONE;
  Entry* e = lookup(key);
  if (e == nullptr) {
    if (PyErr_Occurred()) return nullptr;
    Py_RETURN_NONE;
  }
  at::Tensor o, lse;
  if (!forward_run(hit_of(*e), tq, tk, tv, stats, o, lse)) return nullptr;
  PyObject* po = THPVariable_Wrap(std::move(o));
  if (!stats || po == nullptr) return po;
  PyObject* pl = THPVariable_Wrap(std::move(lse));
  if (pl == nullptr) {
    Py_DECREF(po);
    return nullptr;
  }
  PyObject* out = PyTuple_New(2);
  PyTuple_SET_ITEM(out, 0, po);
  PyTuple_SET_ITEM(out, 1, pl);
  return out;
}

// ---------------------------------------------------------------------------------------------
// floe.attention's front in C++ (_ops._front): the calls that fwd serves, q, k, v positional and
// no keyword beyond causal (True or False), return_lse and enable_gqa (the others at their
// defaults), go to fwd with no Python frame; everything else, and whatever fwd declines, is
// handed as it came to the Python attention (_ops.attention). torch.compile traces the Python
// function in its place (torch._dynamo.substitute_in_graph, registered by _ops).

PyObject* py_attention = nullptr;   // _ops.attention
PyObject* compiler_dict = nullptr;  // torch.compiler's globals: its _is_compiling_flag
PyObject* ops_dict = nullptr;       // _ops's globals: _c_fwd None (tests, benches) turns this off
PyObject* causal_options[2] = {nullptr, nullptr};  // _ops._options(False / True, ...)

struct Names {
  PyObject *causal, *return_lse, *enable_gqa, *window, *bias, *sink, *softcap, *scale, *seq_len_q,
      *seq_len_kv, *deterministic, *engine, *align, *is_compiling_flag, *auto_, *top_left, *c_fwd;
} names;

PyObject* attention_front(PyObject*, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  PyObject *causal = Py_False, *stats = Py_False, *gqa = Py_True;
  bool fast = nargs == 3;
  const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t i = 0; fast && i < nkw; ++i) {
    // Keyword names of a call site are interned: compared by address (any other spelling of
    // the same name just takes the Python path).
    PyObject* name = PyTuple_GET_ITEM(kwnames, i);
    PyObject* value = args[nargs + i];
    if (name == names.causal) {
      causal = value;
    } else if (name == names.return_lse) {
      stats = value;
    } else if (name == names.enable_gqa) {
      gqa = value;
    } else if (name == names.window || name == names.bias || name == names.sink ||
               name == names.softcap || name == names.scale || name == names.seq_len_q ||
               name == names.seq_len_kv) {
      fast = value == Py_None;
    } else if (name == names.deterministic) {
      fast = value == Py_False;
    } else if (name == names.engine) {
      fast = value == names.auto_;
    } else if (name == names.align) {
      fast = value == names.top_left;
    } else {
      fast = false;
    }
  }
  if (fast && (causal == Py_True || causal == Py_False)) {
    // Borrowed: the dicts are held. Python's attention checks torch.compiler.is_compiling().
    PyObject* flag = PyDict_GetItemWithError(compiler_dict, names.is_compiling_flag);
    if (flag == nullptr && PyErr_Occurred()) return nullptr;
    const int compiling = flag == nullptr ? 0 : PyObject_IsTrue(flag);
    PyObject* c_fwd = PyDict_GetItemWithError(ops_dict, names.c_fwd);
    if (c_fwd == nullptr && PyErr_Occurred()) return nullptr;
    const int s = PyObject_IsTrue(stats), g = PyObject_IsTrue(gqa);
    if (s < 0 || g < 0 || compiling < 0) return nullptr;
    if (!compiling && c_fwd != nullptr && c_fwd != Py_None) {
      PyObject* out =
          fwd(args[0], args[1], args[2], causal_options[causal == Py_True], s == 1, g == 1);
      if (out != Py_None) return out;  // a result, or nullptr with the error set
      Py_DECREF(out);
    }
  }
  return PyObject_Vectorcall(py_attention, args, nargsf, kwnames);
}

PyMethodDef attention_front_def = {
    "attention", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(attention_front)),
    METH_FASTCALL | METH_KEYWORDS,
    "attention(q, k, v, *, causal=False, window=None, bias=None, sink=None, softcap=None, "
    "scale=None, seq_len_q=None, seq_len_kv=None, enable_gqa=True, return_lse=False, "
    "deterministic=False, engine='auto', align='top_left')\n--\n\n"
    "floe.attention: floe._floe_torch's front of floe._ops.attention (see its docstring), "
    "which serves the eager plan-cache hits with no Python frame."};

bool backward_tensors(PyObject* d_o, PyObject* q, PyObject* k, PyObject* v, PyObject* o,
                      PyObject* lse, const at::Tensor* ts[6]) {
  ts[0] = plain(q, 4);
  ts[1] = plain(k, 4);
  ts[2] = plain(v, 4);
  ts[3] = plain(o, 4);
  ts[4] = plain(d_o, 4);
  ts[5] = plain(lse, 3);
  for (int i = 0; i < 6; ++i) {
    if (!ts[i]) return false;
  }
  // A d_o of non-unit innermost stride is made dense first (_ops._dense_d_o): Python's.
  return ts[4]->stride(3) == 1 && !modes_active();
}

// _ops._plain_backward's hit: (dq, dk, dv), or None where Python must take the call.
PyObject* bwd(PyObject* d_o, PyObject* q, PyObject* k, PyObject* v, PyObject* o, PyObject* lse,
              PyObject* options) {
  const at::Tensor* ts[6];
  if (!backward_tensors(d_o, q, k, v, o, lse, ts)) Py_RETURN_NONE;
  at::Tensor dq, dk, dv;
  const int served = backward_hit(ts, options, dq, dk, dv);
  if (served < 0) return nullptr;
  if (served == 0) Py_RETURN_NONE;
  PyObject* out = PyTuple_New(3);
  PyTuple_SET_ITEM(out, 0, THPVariable_Wrap(std::move(dq)));
  PyTuple_SET_ITEM(out, 1, THPVariable_Wrap(std::move(dk)));
  PyTuple_SET_ITEM(out, 2, THPVariable_Wrap(std::move(dv)));
  return out;
}

}  // namespace

NB_MODULE(_floe_torch, m) {
  m.doc() = "floe's eager torch ops, the plan-cache hits' path, in C++ (optional)";
  m.attr("TORCH_VERSION") = FLOE_TORCH_VERSION;

  // api_capsule: _floe._C_API; tick: the Python LRU's clock; maxsize: its bound (entries kept
  // here: twice that, Python's evictions dropped first).
  m.def("configure", [](nb::handle api_capsule, nb::handle tick, size_t maxsize) {
    auto* table = static_cast<const floe_py::CApi*>(
        PyCapsule_GetPointer(api_capsule.ptr(), "floe._floe._C_API"));
    if (table == nullptr) throw nb::python_error();
    if (table->version != floe_py::kCApiVersion) {
      throw std::runtime_error("floe._floe_torch: floe._floe's C API is of another version");
    }
    api = table;
    clear();
    Py_XDECREF(tick_counter);
    tick_counter = tick.inc_ref().ptr();
    max_entries = 2 * (maxsize ? maxsize : 1);
  });
  m.def("clear", [](size_t maxsize) {
    clear();
    max_entries = 2 * (maxsize ? maxsize : 1);
  });
  // The C++ autograd node (AttentionNode) for the plain eager calls with gradients: on where
  // enabled, fallback (_ops._plain_backward) taking a backward miss; off: None, Python's
  // _EagerAttention records those calls (FLOE_TORCH_NODE=0).
  m.def("autograd_node", [](bool enabled, nb::handle fallback) {
    if (enabled && !PyCallable_Check(fallback.ptr())) {
      throw nb::type_error("floe._floe_torch.autograd_node: fallback must be callable");
    }
    if (enabled) {
      Py_XDECREF(backward_fallback);
      backward_fallback = fallback.inc_ref().ptr();  // kept: nodes may outlive a later call
    }
    node_enabled = enabled;
  });
  m.def("autograd_node_enabled", [] { return node_enabled; });
  // floe.attention's C++ front (attention_front): python_attention takes every call it does
  // not serve; options_false/options_true: _ops._options(causal, None, 'top_left', None, None,
  // False, 'auto') of each causal.
  m.def("make_front",
        [](nb::handle python_attention, nb::handle compiler, nb::handle ops,
           nb::handle options_false, nb::handle options_true) -> nb::object {
          static bool interned = false;
          if (!interned) {
            auto intern = [](const char* s) { return PyUnicode_InternFromString(s); };  // kept
            names = Names{intern("causal"),        intern("return_lse"),
                          intern("enable_gqa"),    intern("window"),
                          intern("bias"),          intern("sink"),
                          intern("softcap"),       intern("scale"),
                          intern("seq_len_q"),     intern("seq_len_kv"),
                          intern("deterministic"), intern("engine"),
                          intern("align"),         intern("_is_compiling_flag"),
                          intern("auto"),          intern("top_left"),
                          intern("_c_fwd")};
            interned = true;
          }
          Py_XDECREF(py_attention);
          Py_XDECREF(compiler_dict);
          Py_XDECREF(ops_dict);
          Py_XDECREF(causal_options[0]);
          Py_XDECREF(causal_options[1]);
          py_attention = python_attention.inc_ref().ptr();
          compiler_dict = PyModule_GetDict(compiler.ptr());  // borrowed, then held
          ops_dict = PyModule_GetDict(ops.ptr());
          if (compiler_dict == nullptr || ops_dict == nullptr) throw nb::python_error();
          Py_INCREF(compiler_dict);
          Py_INCREF(ops_dict);
          causal_options[0] = options_false.inc_ref().ptr();
          causal_options[1] = options_true.inc_ref().ptr();
          // help(floe.attention): the Python function's docstring after the signature.
          static std::string doc;
          if (doc.empty()) {
            doc = attention_front_def.ml_doc;
            nb::object text = nb::borrow(python_attention).attr("__doc__");
            if (PyUnicode_Check(text.ptr())) doc += "\n\n" + nb::cast<std::string>(text);
            attention_front_def.ml_doc = doc.c_str();
          }
          PyObject* f = PyCFunction_NewEx(&attention_front_def, nullptr, nullptr);
          if (f == nullptr) throw nb::python_error();
          return nb::steal(f);
        });
  // For host-time measurement only (bench/python_node.py --stub): hits allocate their outputs
  // and launch nothing; the outputs are then garbage.
  m.def("stub_execute", [](bool on) { stub = on; });
  m.def("hits", [] { return hits; });
  m.def("size", [] { return cache().size(); });

  // stats, enable_gqa: any Python truth value (as floe.attention takes them).
  m.def("fwd",
        [](nb::handle q, nb::handle k, nb::handle v, nb::handle options, nb::handle stats,
           nb::handle enable_gqa) -> nb::object {
          const int s = PyObject_IsTrue(stats.ptr()), g = PyObject_IsTrue(enable_gqa.ptr());
          if (s < 0 || g < 0) throw nb::python_error();
          PyObject* r = fwd(q.ptr(), k.ptr(), v.ptr(), options.ptr(), s == 1, g == 1);
          if (r == nullptr) throw nb::python_error();
          return nb::steal(r);
        });
  m.def("bwd",
        [](nb::handle d_o, nb::handle q, nb::handle k, nb::handle v, nb::handle o, nb::handle lse,
           nb::handle options) -> nb::object {
          PyObject* r =
              bwd(d_o.ptr(), q.ptr(), k.ptr(), v.ptr(), o.ptr(), lse.ptr(), options.ptr());
          if (r == nullptr) throw nb::python_error();
          return nb::steal(r);
        });
  // entry: the Python LRU's [plan, tick] that the same call found or built.
  m.def("remember_fwd", [](nb::handle q, nb::handle k, nb::handle v, nb::handle options, bool stats,
                           nb::handle entry) {
    const at::Tensor* ts[3];
    Key key;
    if (forward_tensors(q.ptr(), k.ptr(), v.ptr(), true, ts) &&
        make_key(key, ts, 3, options.ptr(), stats ? 1 : 0)) {
      remember(key, entry.ptr());
    }
  });
  m.def("remember_bwd", [](nb::handle d_o, nb::handle q, nb::handle k, nb::handle v, nb::handle o,
                           nb::handle lse, nb::handle options, nb::handle entry) {
    const at::Tensor* ts[6];
    Key key;
    if (backward_tensors(d_o.ptr(), q.ptr(), k.ptr(), v.ptr(), o.ptr(), lse.ptr(), ts) &&
        make_key(key, ts, 6, options.ptr(), 2)) {
      remember(key, entry.ptr());
    }
  });
}
