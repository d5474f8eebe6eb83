// merge: two attention results over disjoint key sets, each normalised over its own keys with
// its log-sum-exp, into the result over their union (SERVING F.3; DESIGN 2.4):
//
//   lse = log(exp(lse_a) + exp(lse_b)),  O = exp(lse_a - lse) O_a + exp(lse_b - lse) O_b
//
// computed in the stable form (exponents relative to the larger lse). A row whose part has
// lse = -inf (no visible key) takes nothing from it, whatever that part's O holds; both -inf
// gives O = 0, lse = -inf; a NaN lse gives NaN. Context-parallel attention merges ring steps
// with it; the decode engine's split-KV combine runs the same code.
//
//   auto mp = floe::MergeProblem::make(b, h, s, d, floe::DType::f32);   // packed [B, H, S, D]
//   auto plan = floe::MergePlan::build(mp, target);                     // validates
//   plan->execute(floe::MergeArguments{}.set(floe::MergeTensor::o_a, oa)...
//                                       .set(floe::MergeTensor::o, oa), stream);  // in place
//
// Every tensor has its own strides (in elements, >= 0), so head-major or token-major rows,
// ragged [T, H, D] (b = 1) and views into larger buffers all merge in place. O tensors are f32,
// f16 or bf16, each its own; lse tensors are f32. Outputs may alias the inputs of part a (or
// b) exactly (the same base and layout): each element is read before it is written, by the same
// thread. Execute launches one kernel on the caller's stream (no allocation, no sync: graph-safe)
// and is bitwise deterministic; on a CPU target it runs the fp64 reference.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "floe/status.h"
#include "floe/target.h"
#include "floe/tensor.h"

struct CUstream_st;

namespace floe {

enum class MergeTensor : uint8_t { o_a, lse_a, o_b, lse_b, o, lse };
inline constexpr int kMergeTensorCount = 6;
inline constexpr int index_of(MergeTensor id) {
  return static_cast<int>(id);
}
// "o_a", "lse_a", "o_b", "lse_b", "o", "lse": the names messages use.
const char* to_string(MergeTensor id);

class MergeProblem {
 public:
  // O tensors [b, h, s, d] of o_dtype, lse tensors [b, h, s] f32, all packed in that order.
  static MergeProblem make(int64_t b, int64_t h, int64_t s, int64_t d, DType o_dtype);

  // Element strides of one tensor, in logical order (4 for O tensors, 3 for lse).
  MergeProblem& set_strides(MergeTensor id, std::initializer_list<int64_t> strides);
  // The element type of one O tensor (f32, f16 or bf16).
  MergeProblem& set_dtype(MergeTensor id, DType dtype);

  const TensorDesc& tensor(MergeTensor id) const { return tensors_[index_of(id)]; }
  int64_t b() const { return b_; }
  int64_t h() const { return h_; }
  int64_t s() const { return s_; }
  int64_t d() const { return d_; }
  // A misuse of a setter (wrong stride count), reported by MergePlan::build.
  const std::string& setter_error() const { return setter_error_; }

 private:
  int64_t b_ = 0, h_ = 0, s_ = 0, d_ = 0;
  std::array<TensorDesc, kMergeTensorCount> tensors_{};
  std::string setter_error_;
};

struct MergeArguments {
  std::array<void*, kMergeTensorCount> ptr{};

  MergeArguments& set(MergeTensor id, const void* p) {
    ptr[index_of(id)] = const_cast<void*>(p);
    return *this;
  }
  void* get(MergeTensor id) const { return ptr[index_of(id)]; }
};

namespace detail {
struct MergePlanImpl;
}

class MergePlan {
 public:
  // Validates: every message names the tensor, the field and the rule.
  static Result<MergePlan> build(const MergeProblem& problem, const Target& target);

  MergePlan() = default;  // an empty plan; executes nothing
  const MergeProblem& problem() const;

  // Checks the pointers (declared, aligned to their element, outputs overlapping nothing but
  // the exact tensor of part a or b they replace), then merges. No workspace.
  Status execute(const MergeArguments& args, CUstream_st* stream = nullptr) const;

 private:
  std::shared_ptr<const detail::MergePlanImpl> impl_;
};

}  // namespace floe
