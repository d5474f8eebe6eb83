// floe._floe: the Python face of floe's public C++ API (include/floe/), nothing more. The torch
// layer (floe/_ops.py) passes raw pointers, strides and the stream; this module knows no torch.
#include <nanobind/nanobind.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "c_api.h"
#include "floe/floe.h"

namespace nb = nanobind;

namespace {

// Carries floe's message (tensor, field, rule) to Python as floe.FloeError.
struct FloeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "<code>: <message>", the code said once where the message already starts with it.
[[noreturn]] void raise(const floe::Status& st) {
  const std::string code = floe::to_string(st.code());
  if (st.message().compare(0, code.size(), code) == 0) throw FloeError(st.message());
  throw FloeError(code + ": " + st.message());
}

floe::DType dtype_of(int code) {
  if (code < 0 || code > static_cast<int>(floe::DType::i64)) {
    throw std::invalid_argument("floe: unknown dtype code " + std::to_string(code));
  }
  return static_cast<floe::DType>(code);
}

// Targets are read once per device (Target::cuda queries the device's properties).
// device: -1 the CPU, >= 0 a CUDA ordinal; arch > 0 instead plans for that architecture with
// no device (explain only: such plans cannot execute).
const floe::Target& target_for(int device, int arch) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, floe::Target> targets;
  std::lock_guard<std::mutex> lock(mu);
  const std::pair<int, int> key{arch > 0 ? -2 : device, arch};
  auto it = targets.find(key);
  if (it != targets.end()) return it->second;
  if (arch > 0) return targets.emplace(key, floe::Target::cuda_arch(arch)).first->second;
  if (device < 0) return targets.emplace(key, floe::Target::cpu()).first->second;
  floe::Result<floe::Target> t = floe::Target::cuda(device);
  if (!t) raise(t.status());
  return targets.emplace(key, *t).first->second;
}

// One tensor as the torch layer describes it: (floe dtype code, strides in logical order).
using TensorSpec = std::optional<std::tuple<int, std::vector<int64_t>>>;
using Shape7 = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;
// (total tokens, offsets dtype code) of a ragged side; (page_size, num_pages, max_pages).
using RaggedSpec = std::optional<std::tuple<int64_t, int>>;
using PagedSpec = std::optional<std::tuple<int64_t, int64_t, int64_t>>;

floe::Problem make_problem(bool backward, int dtype, const Shape7& s,
                           const std::vector<TensorSpec>& tensors,
                           std::optional<std::tuple<int64_t, int64_t>> bias_dims, bool bias_grad,
                           bool sink, bool seq_len_q, bool seq_len_kv, bool stats,
                           std::optional<double> scale, std::optional<double> softcap, int align,
                           std::optional<int64_t> left, std::optional<int64_t> right,
                           bool deterministic, const RaggedSpec& ragged_q,
                           const RaggedSpec& ragged_kv, const PagedSpec& paged_kv) {
  const auto [b, h_q, h_kv, s_q, s_kv, d_qk, d_v] = s;
  const floe::Shape shape{b, h_q, h_kv, s_q, s_kv, d_qk, d_v};
  floe::Problem p = backward ? floe::Problem::backward(shape, dtype_of(dtype))
                             : floe::Problem::forward(shape, dtype_of(dtype));
  if (stats) p.set_stats();
  if (bias_dims) {
    p.set_bias(std::get<0>(*bias_dims), std::get<1>(*bias_dims));
    if (backward) p.set_bias_grad(bias_grad);
  }
  if (sink) p.set_sink();
  if (seq_len_q) p.set_seq_len_q();
  if (seq_len_kv) p.set_seq_len_kv();
  if (scale) p.set_scale(*scale);
  if (softcap) p.set_softcap(*softcap);
  if (left || right) {
    p.set_window(left, right,
                 align == 0 ? floe::MaskAlign::top_left : floe::MaskAlign::bottom_right);
  }
  if (deterministic) p.set_deterministic();
  // After every option that declares a tensor (stats, sink, lengths): these redeclare the
  // side's tensors in the packed or paged layout (DESIGN 2.1, 2.2), before the strides below.
  if (ragged_q) p.set_ragged_q(std::get<0>(*ragged_q), dtype_of(std::get<1>(*ragged_q)));
  if (ragged_kv) p.set_ragged_kv(std::get<0>(*ragged_kv), dtype_of(std::get<1>(*ragged_kv)));
  if (paged_kv) {
    const auto [page_size, num_pages, max_pages] = *paged_kv;
    p.set_paged_kv(page_size, num_pages, max_pages);
  }
  if (tensors.size() > static_cast<size_t>(floe::kTensorCount)) {
    throw std::invalid_argument("floe: more tensor descriptions than tensors");
  }
  // Dims stay as the problem declared them; the caller's dtype and strides replace the packed
  // ones, so that validation names whatever does not fit.
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i]) continue;
    const auto id = static_cast<floe::TensorId>(i);
    const auto& [dt, strides] = *tensors[i];
    std::optional<floe::TensorDesc> desc = p.tensor(id);
    if (!desc) {
      throw FloeError(std::string("invalid problem: tensor '") + floe::to_string(id) +
                      "' given for a problem that does not declare it");
    }
    if (static_cast<int>(strides.size()) != desc->rank) {
      throw FloeError(std::string("invalid problem: tensor '") + floe::to_string(id) +
                      "' strides: " + std::to_string(strides.size()) +
                      " given, the tensor has rank " + std::to_string(desc->rank));
    }
    desc->dtype = dtype_of(dt);
    for (int r = 0; r < desc->rank; ++r) desc->strides[r] = strides[r];
    p.set_tensor(id, *desc);
  }
  return p;
}

using Verdicts = std::vector<std::tuple<std::string, bool, std::string>>;

// c_api.h's table, for the optional C++ torch layer (src/torch_ops.cc).
PyObject* floe_error_type = nullptr;
thread_local std::string last_error;

const void* c_plan_of(PyObject* obj) {
  floe::Plan* plan = nullptr;
  return nb::try_cast<floe::Plan*>(nb::handle(obj), plan) ? plan : nullptr;
}

size_t c_workspace_bytes(const void* plan) {
  return static_cast<const floe::Plan*>(plan)->workspace_bytes();
}

// No Python here: the caller may have released the GIL. A failure's message waits in
// last_error for c_raise_last, which the caller calls with the GIL held.
int c_execute(const void* plan, void* const* ptrs, int n, void* workspace, size_t workspace_size,
              void* stream) {
  floe::Arguments args;
  for (int i = 0; i < n && i < floe::kTensorCount; ++i) args.ptr[i] = ptrs[i];
  const floe::Status st = static_cast<const floe::Plan*>(plan)->execute(
      args, workspace, workspace_size, static_cast<floe::Stream>(stream));
  if (st) return 0;
  const std::string code = floe::to_string(st.code());
  last_error =
      st.message().compare(0, code.size(), code) == 0 ? st.message() : code + ": " + st.message();
  return -1;
}

void c_raise_last() {
  PyErr_SetString(floe_error_type, last_error.c_str());
}

const floe_py::CApi c_api{floe_py::kCApiVersion, c_plan_of, c_workspace_bytes, c_execute,
                          c_raise_last};

Verdicts verdicts_of(const floe::Plan& plan) {
  Verdicts out;
  for (const auto& v : plan.verdicts()) out.emplace_back(v.engine, v.accepted, v.reason);
  return out;
}

}  // namespace

NB_MODULE(_floe, m) {
  m.doc() = "floe's public C++ API: problems, plans, execute on raw pointers";
  floe_error_type = nb::exception<FloeError>(m, "FloeError", PyExc_RuntimeError).ptr();
  m.attr("_C_API") =
      nb::steal(PyCapsule_New(const_cast<floe_py::CApi*>(&c_api), "floe._floe._C_API", nullptr));
  // The torch layer's plan cache lives until interpreter exit; nanobind would report its plans.
  nb::set_leak_warnings(false);

  nb::class_<floe::Plan>(m, "Plan")
      .def_prop_ro("engine", &floe::Plan::engine)
      .def_prop_ro("workspace_bytes", &floe::Plan::workspace_bytes)
      .def("explain", &floe::Plan::explain)
      .def("verdicts", &verdicts_of)
      // ptrs: one address per TensorId (0 for none). The GIL is released: a CPU plan computes
      // here, a CUDA plan only launches.
      .def(
          "execute",
          [](const floe::Plan& plan, const std::array<uintptr_t, floe::kTensorCount>& ptrs,
             uintptr_t workspace, size_t workspace_size, uintptr_t stream) {
            floe::Arguments args;
            for (int i = 0; i < floe::kTensorCount; ++i) {
              args.ptr[i] = reinterpret_cast<void*>(ptrs[i]);
            }
            floe::Status st;
            {
              nb::gil_scoped_release release;
              st = plan.execute(args, reinterpret_cast<void*>(workspace), workspace_size,
                                reinterpret_cast<floe::Stream>(stream));
            }
            if (!st) raise(st);
          },
          nb::arg("ptrs"), nb::arg("workspace"), nb::arg("workspace_size"), nb::arg("stream"))
      // The same with the addresses as trailing positional ints in TensorId order (q, k, v, o,
      // stats, ...; the ones not given are 0): the torch layer's per-call path, which then
      // builds no tuple of 18 and nanobind converts no sequence (host time per call).
      .def("run", [](const floe::Plan& plan, uintptr_t workspace, size_t workspace_size,
                     uintptr_t stream, nb::args ptrs) {
        const size_t n = ptrs.size();
        if (n > static_cast<size_t>(floe::kTensorCount)) {
          throw std::invalid_argument("floe: more addresses than tensors");
        }
        floe::Arguments args;
        for (size_t i = 0; i < n; ++i) {
          args.ptr[i] = reinterpret_cast<void*>(nb::cast<uintptr_t>(ptrs[i]));
        }
        floe::Status st;
        {
          nb::gil_scoped_release release;
          st = plan.execute(args, reinterpret_cast<void*>(workspace), workspace_size,
                            reinterpret_cast<floe::Stream>(stream));
        }
        if (!st) raise(st);
      });

  // device: -1 for the CPU (reference engine), else the CUDA ordinal; arch: see target_for.
  m.def(
      "build",
      [](bool backward, int dtype, const Shape7& shape, const std::vector<TensorSpec>& tensors,
         std::optional<std::tuple<int64_t, int64_t>> bias_dims, bool bias_grad, bool sink,
         bool seq_len_q, bool seq_len_kv, bool stats, std::optional<double> scale,
         std::optional<double> softcap, int align, std::optional<int64_t> left,
         std::optional<int64_t> right, bool deterministic, int device, const std::string& engine,
         int arch, const RaggedSpec& ragged_q, const RaggedSpec& ragged_kv,
         const PagedSpec& paged_kv) {
        floe::Problem p = make_problem(backward, dtype, shape, tensors, bias_dims, bias_grad, sink,
                                       seq_len_q, seq_len_kv, stats, scale, softcap, align, left,
                                       right, deterministic, ragged_q, ragged_kv, paged_kv);
        floe::PlanOptions options;
        options.engine = engine;
        floe::Result<floe::Plan> plan = floe::Plan::build(p, target_for(device, arch), options);
        if (!plan) raise(plan.status());
        return std::move(*plan);
      },
      nb::arg("backward"), nb::arg("dtype"), nb::arg("shape"), nb::arg("tensors"),
      nb::arg("bias_dims").none(), nb::arg("bias_grad"), nb::arg("sink"), nb::arg("seq_len_q"),
      nb::arg("seq_len_kv"), nb::arg("stats"), nb::arg("scale").none(), nb::arg("softcap").none(),
      nb::arg("align"), nb::arg("left").none(), nb::arg("right").none(), nb::arg("deterministic"),
      nb::arg("device"), nb::arg("engine"), nb::arg("arch") = 0,
      nb::arg("ragged_q").none() = nb::none(), nb::arg("ragged_kv").none() = nb::none(),
      nb::arg("paged_kv").none() = nb::none());

  // floe::MergePlan (DESIGN 2.4) over raw pointers: O tensors [b, h, s, d] (dtype codes),
  // lse tensors [b, h, s] f32, each with its strides, in MergeTensor order (o_a, lse_a, o_b,
  // lse_b, o, lse). device: -1 for the CPU (fp64 reference), else the CUDA ordinal.
  nb::class_<floe::MergePlan>(m, "MergePlan")
      .def("run",
           [](const floe::MergePlan& plan, const std::array<uintptr_t, 6>& ptrs, uintptr_t stream) {
             floe::MergeArguments args;
             for (int i = 0; i < floe::kMergeTensorCount; ++i) {
               args.ptr[i] = reinterpret_cast<void*>(ptrs[i]);
             }
             floe::Status st;
             {
               nb::gil_scoped_release release;
               st = plan.execute(args, reinterpret_cast<CUstream_st*>(stream));
             }
             if (!st) raise(st);
           });
  m.def("build_merge",
        [](int64_t b, int64_t h, int64_t s, int64_t d, const std::array<int, 3>& o_dtypes,
           const std::array<std::vector<int64_t>, 6>& strides, int device) {
          floe::MergeProblem p = floe::MergeProblem::make(b, h, s, d, dtype_of(o_dtypes[0]));
          p.set_dtype(floe::MergeTensor::o_b, dtype_of(o_dtypes[1]));
          p.set_dtype(floe::MergeTensor::o, dtype_of(o_dtypes[2]));
          for (int i = 0; i < floe::kMergeTensorCount; ++i) {
            const std::vector<int64_t>& st = strides[i];
            const auto id = static_cast<floe::MergeTensor>(i);
            if (st.size() == 4) {
              p.set_strides(id, {st[0], st[1], st[2], st[3]});
            } else if (st.size() == 3) {
              p.set_strides(id, {st[0], st[1], st[2]});
            } else {
              throw FloeError(std::string("invalid_argument: tensor '") + floe::to_string(id) +
                              "': " + std::to_string(st.size()) + " strides, it has 3 or 4 dims");
            }
          }
          floe::Result<floe::MergePlan> plan = floe::MergePlan::build(p, target_for(device, 0));
          if (!plan) raise(plan.status());
          return std::move(*plan);
        });

  m.def("engine_names", &floe::engine_names);
  m.def("cuda_available", &floe::cuda_available);
  m.attr("TENSOR_NAMES") = [] {
    std::vector<std::string> names;
    for (int i = 0; i < floe::kTensorCount; ++i) {
      names.emplace_back(floe::to_string(static_cast<floe::TensorId>(i)));
    }
    return names;
  }();
}
