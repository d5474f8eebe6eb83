// The merge op: its problem, validation, plan and the fp64 reference (CPU targets).
#include "floe/merge.h"

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "common/checked_size.h"
#include "common/dtype_convert.h"
#include "kernels/lse_merge.h"
#include "ops/merge_kernel.h"
#include "plan/validate.h"

namespace floe {

namespace {

bool is_o(MergeTensor id) {
  return id == MergeTensor::o_a || id == MergeTensor::o_b || id == MergeTensor::o;
}
bool is_merge_output(MergeTensor id) {
  return id == MergeTensor::o || id == MergeTensor::lse;
}

std::string t(MergeTensor id) {
  return std::string("tensor '") + to_string(id) + "'";
}

}  // namespace

const char* to_string(MergeTensor id) {
  switch (id) {
    case MergeTensor::o_a:
      return "o_a";
    case MergeTensor::lse_a:
      return "lse_a";
    case MergeTensor::o_b:
      return "o_b";
    case MergeTensor::lse_b:
      return "lse_b";
    case MergeTensor::o:
      return "o";
    case MergeTensor::lse:
      return "lse";
  }
  return "?";
}

MergeProblem MergeProblem::make(int64_t b, int64_t h, int64_t s, int64_t d, DType o_dtype) {
  MergeProblem p;
  p.b_ = b;
  p.h_ = h;
  p.s_ = s;
  p.d_ = d;
  for (int i = 0; i < kMergeTensorCount; ++i) {
    const auto id = static_cast<MergeTensor>(i);
    p.tensors_[i] = is_o(id) ? TensorDesc::packed(o_dtype, {b, h, s, d})
                             : TensorDesc::packed(DType::f32, {b, h, s});
  }
  return p;
}

MergeProblem& MergeProblem::set_strides(MergeTensor id, std::initializer_list<int64_t> strides) {
  TensorDesc& desc = tensors_[index_of(id)];
  if (static_cast<int>(strides.size()) != desc.rank) {
    setter_error_ = t(id) + " strides: " + std::to_string(strides.size()) +
                    " given, the tensor has " + std::to_string(desc.rank) + " dims";
    return *this;
  }
  int i = 0;
  for (int64_t s : strides) desc.strides[i++] = s;
  return *this;
}

MergeProblem& MergeProblem::set_dtype(MergeTensor id, DType dtype) {
  tensors_[index_of(id)].dtype = dtype;
  return *this;
}

namespace detail {

struct MergePlanImpl {
  MergeProblem problem = MergeProblem::make(0, 0, 0, 1, DType::f32);
  Target target;
  std::array<size_t, kMergeTensorCount> span_bytes{};
};

namespace {

std::vector<std::string> validate_merge(const MergeProblem& p) {
  std::vector<std::string> errors;
  if (!p.setter_error().empty()) errors.push_back(p.setter_error());
  if (p.b() < 0 || p.h() < 0 || p.s() < 0 || p.d() < 1) {
    errors.push_back("merge problem dims: b, h and s must be >= 0 and d >= 1 (got b " +
                     std::to_string(p.b()) + ", h " + std::to_string(p.h()) + ", s " +
                     std::to_string(p.s()) + ", d " + std::to_string(p.d()) + ")");
    return errors;
  }
  for (int i = 0; i < kMergeTensorCount; ++i) {
    const auto id = static_cast<MergeTensor>(i);
    const TensorDesc& d = p.tensor(id);
    if (is_o(id) && d.dtype != DType::f32 && d.dtype != DType::f16 && d.dtype != DType::bf16) {
      errors.push_back(t(id) + " dtype: " + to_string(d.dtype) + "; must be f32, f16 or bf16");
    }
    if (!is_o(id) && d.dtype != DType::f32) {
      errors.push_back(t(id) + " dtype: " + to_string(d.dtype) + "; an lse is f32");
    }
    for (int k = 0; k < d.rank; ++k) {
      if (d.strides[k] < 0) {
        errors.push_back(t(id) + " strides[" + std::to_string(k) +
                         "]: " + std::to_string(d.strides[k]) + "; must be >= 0");
      }
    }
    if (d.span_bytes() == SIZE_MAX) {
      errors.push_back(t(id) + ": its span in bytes does not fit 64 bits");
    }
    if (is_merge_output(id) && !is_non_overlapping(d)) {
      errors.push_back(t(id) + " strides: the output overlaps itself (two indices address one " +
                       "element)");
    }
  }
  return errors;
}

bool same_layout(const TensorDesc& x, const TensorDesc& y) {
  if (x.dtype != y.dtype || x.rank != y.rank) return false;
  for (int i = 0; i < x.rank; ++i) {
    if (x.dims[i] > 1 && x.strides[i] != y.strides[i]) return false;
  }
  return true;
}

// Outputs overlap nothing, except the input of part a or b they replace exactly (in place).
Status check_pointers(const MergePlanImpl& p, const MergeArguments& args) {
  uintptr_t lo[kMergeTensorCount], hi[kMergeTensorCount];
  for (int i = 0; i < kMergeTensorCount; ++i) {
    const auto id = static_cast<MergeTensor>(i);
    void* ptr = args.ptr[i];
    const TensorDesc& d = p.problem.tensor(id);
    if (ptr == nullptr) {
      return Status(Code::invalid_argument,
                    std::string("argument '") + to_string(id) + "': null, the merge needs it");
    }
    if (reinterpret_cast<uintptr_t>(ptr) % size_of(d.dtype) != 0) {
      return Status(Code::invalid_argument, std::string("argument '") + to_string(id) +
                                                "': must be aligned to its element (" +
                                                std::to_string(size_of(d.dtype)) + " bytes)");
    }
    lo[i] = reinterpret_cast<uintptr_t>(ptr);
    if (__builtin_add_overflow(lo[i], p.span_bytes[i], &hi[i])) {
      return Status(Code::invalid_argument,
                    std::string("argument '") + to_string(id) +
                        "': its span runs past the end of the address space");
    }
  }
  for (MergeTensor out : {MergeTensor::o, MergeTensor::lse}) {
    const int i = index_of(out);
    for (int j = 0; j < kMergeTensorCount; ++j) {
      const auto other = static_cast<MergeTensor>(j);
      if (j == i || (other == MergeTensor::o && out == MergeTensor::lse)) continue;
      if (!(lo[i] < hi[j] && lo[j] < hi[i])) continue;
      const bool replaces = !is_merge_output(other) && is_o(other) == is_o(out) && lo[i] == lo[j] &&
                            same_layout(p.problem.tensor(out), p.problem.tensor(other));
      if (replaces) continue;
      return Status(Code::invalid_argument,
                    std::string("argument '") + to_string(out) + "': its memory overlaps " +
                        (is_merge_output(other) ? "output '" : "input '") + to_string(other) +
                        "'; an output may only replace the input of part a or b of its kind " +
                        "exactly (same base, dtype and strides)");
    }
  }
  return Status();
}

// The fp64 reference: the same rules as the device, one row at a time.
void merge_on_host(const MergeProblem& p, const MergeArguments& args) {
  const TensorDesc& oa = p.tensor(MergeTensor::o_a);
  const TensorDesc& ob = p.tensor(MergeTensor::o_b);
  const TensorDesc& o = p.tensor(MergeTensor::o);
  const TensorDesc& la = p.tensor(MergeTensor::lse_a);
  const TensorDesc& lb = p.tensor(MergeTensor::lse_b);
  const TensorDesc& l = p.tensor(MergeTensor::lse);
  const auto off = [](const TensorDesc& d, int64_t b, int64_t h, int64_t s) {
    return b * d.strides[0] + h * d.strides[1] + s * d.strides[2];
  };
  std::vector<double> acc(static_cast<size_t>(p.d()));
  for (int64_t b = 0; b < p.b(); ++b) {
    for (int64_t h = 0; h < p.h(); ++h) {
      for (int64_t s = 0; s < p.s(); ++s) {
        const double lse_a =
            static_cast<const float*>(args.get(MergeTensor::lse_a))[off(la, b, h, s)];
        const double lse_b =
            static_cast<const float*>(args.get(MergeTensor::lse_b))[off(lb, b, h, s)];
        kernels::LseMerge<double> m;
        m.see(lse_a);
        m.see(lse_b);
        const bool use_a = m.contributes(lse_a), use_b = m.contributes(lse_b);
        const double wa = use_a ? m.weight(lse_a) : 0.0, wb = use_b ? m.weight(lse_b) : 0.0;
        const double factor = m.factor(wa + wb);
        for (int64_t d = 0; d < p.d(); ++d) {
          double x = 0.0;
          if (use_a) {
            x += wa * load_as_float(args.get(MergeTensor::o_a),
                                    off(oa, b, h, s) + d * oa.strides[3], oa.dtype);
          }
          if (use_b) {
            x += wb * load_as_float(args.get(MergeTensor::o_b),
                                    off(ob, b, h, s) + d * ob.strides[3], ob.dtype);
          }
          acc[static_cast<size_t>(d)] = x * factor;
        }
        for (int64_t d = 0; d < p.d(); ++d) {
          store_from_float(args.get(MergeTensor::o), off(o, b, h, s) + d * o.strides[3], o.dtype,
                           static_cast<float>(acc[static_cast<size_t>(d)]));
        }
        static_cast<float*>(args.get(MergeTensor::lse))[off(l, b, h, s)] =
            static_cast<float>(m.lse(wa + wb));
      }
    }
  }
}

}  // namespace
}  // namespace detail

Result<MergePlan> MergePlan::build(const MergeProblem& problem, const Target& target) {
  const std::vector<std::string> errors = detail::validate_merge(problem);
  if (!errors.empty()) {
    std::string msg = errors.front();
    if (errors.size() > 1) msg += " (and " + std::to_string(errors.size() - 1) + " more)";
    return Status(Code::invalid_problem, msg);
  }
  if (target.kind == Target::Kind::cuda && target.executable) {
    if (Status st = detail::merge::load_kernel(); !st) return st;
  }
  auto impl = std::make_shared<detail::MergePlanImpl>();
  impl->problem = problem;
  impl->target = target;
  for (int i = 0; i < kMergeTensorCount; ++i) {
    impl->span_bytes[i] = problem.tensor(static_cast<MergeTensor>(i)).span_bytes();
  }
  MergePlan plan;
  plan.impl_ = std::move(impl);
  return plan;
}

const MergeProblem& MergePlan::problem() const {
  static const MergeProblem empty = MergeProblem::make(0, 0, 0, 1, DType::f32);
  return impl_ ? impl_->problem : empty;
}

Status MergePlan::execute(const MergeArguments& args, CUstream_st* stream) const {
  if (!impl_) return Status(Code::invalid_argument, "merge plan: empty (built by default)");
  const detail::MergePlanImpl& p = *impl_;
  if (!p.target.executable) {
    return Status(Code::not_supported,
                  "merge plan target: planned without a device; it cannot "
                  "execute");
  }
  if (Status st = detail::check_pointers(p, args); !st) return st;
  if (p.target.kind == Target::Kind::cpu) {
    detail::merge_on_host(p.problem, args);
    return Status();
  }
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != p.target.device) {
    return Status(Code::invalid_argument, "merge plan target: built for CUDA device " +
                                              std::to_string(p.target.device) +
                                              ", the current device is " + std::to_string(current));
  }
  detail::merge::Params params;
  for (int i = 0; i < kMergeTensorCount; ++i) {
    const TensorDesc& d = p.problem.tensor(static_cast<MergeTensor>(i));
    params.t[i].ptr = args.ptr[i];
    params.t[i].dtype = d.dtype;
    for (int k = 0; k < d.rank; ++k) params.t[i].s[k] = d.strides[k];
  }
  params.b = p.problem.b();
  params.h = p.problem.h();
  params.s = p.problem.s();
  params.d = p.problem.d();
  return detail::merge::launch(params, stream);
}

}  // namespace floe
