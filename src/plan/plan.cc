#include "floe/plan.h"

#include <cuda_runtime_api.h>

#include "engines/engine.h"
#include "engines/facts.h"
#include "engines/workspace.h"
#include "plan/select.h"
#include "plan/validate.h"

namespace floe {

namespace detail {

struct PlanImpl {
  PlanImpl(const Problem& p, const Target& t) : problem(p), target(t) {}

  Problem problem;
  Target target;
  Facts facts;
  std::string engine;
  std::vector<EngineVerdict> verdicts;
  WorkspaceLayout workspace;
  std::unique_ptr<const LaunchPlan> launch;
  std::array<size_t, kTensorCount> alignment{};
  std::array<size_t, kTensorCount> span_bytes{};  // of each declared tensor, for the alias check
};

// Refuses an output whose bytes [ptr, ptr + span) meet those of another output or of an input
// (DESIGN 2), on exact 64-bit addresses: a range that would wrap past 2^64 is refused too.
// Ranges, not elements: outputs interleaved in one buffer are refused. No allocation unless
// refusing.
Status check_aliasing(const PlanImpl& p, const Arguments& args) {
  const Direction dir = p.problem.direction();
  uintptr_t lo[kTensorCount] = {}, hi[kTensorCount] = {};
  for (int i = 0; i < kTensorCount; ++i) {
    if (!p.facts.has(static_cast<TensorId>(i))) continue;
    lo[i] = reinterpret_cast<uintptr_t>(args.ptr[i]);
    if (__builtin_add_overflow(lo[i], p.span_bytes[i], &hi[i])) {
      return Status(Code::invalid_argument,
                    std::string("argument '") + to_string(static_cast<TensorId>(i)) +
                        "': its span runs past the end of the address space");
    }
  }
  for (int i = 0; i < kTensorCount; ++i) {
    const auto a = static_cast<TensorId>(i);
    if (!p.facts.has(a) || !is_output(a, dir)) continue;
    for (int j = 0; j < kTensorCount; ++j) {
      const auto b = static_cast<TensorId>(j);
      if (j == i || !p.facts.has(b) || (is_output(b, dir) && j < i)) continue;
      if (lo[i] < hi[j] && lo[j] < hi[i]) {
        return Status(Code::invalid_argument,
                      std::string("argument '") + to_string(a) + "': its memory overlaps " +
                          (is_output(b, dir) ? "output '" : "input '") + to_string(b) +
                          "'; an output must not overlap another output or an input");
      }
    }
  }
  return Status();
}

}  // namespace detail

namespace {

const detail::PlanImpl& empty_impl() {
  static const detail::PlanImpl impl(Problem::forward(Shape{}, DType::bf16), Target::cpu(1));
  return impl;
}

std::string verdict_lines(const std::vector<EngineVerdict>& verdicts) {
  std::string out;
  for (const EngineVerdict& v : verdicts) {
    out += "  " + v.engine + ": " +
           (v.accepted ? std::string("accepted") : "declined: " + v.reason) + "\n";
  }
  return out;
}

}  // namespace

Result<Plan> Plan::build(const Problem& problem, const Target& target, const PlanOptions& options) {
  if (Status st = detail::validate_status(problem); !st) return st;
  if (options.engine != "auto") {
    bool known = false;
    for (const auto* e : detail::ranked_engines()) known |= options.engine == e->name();
    if (!known) {
      std::string names;
      for (const auto& n : engine_names()) names += (names.empty() ? "" : ", ") + n;
      return Status(Code::not_supported, "plan option engine: '" + options.engine +
                                             "' is not an engine (" + names + ")");
    }
  }
  auto impl = std::make_shared<detail::PlanImpl>(problem, target);
  impl->facts = detail::make_facts(problem);
  detail::Selection sel = detail::select_engine(impl->facts, target, options.engine);
  impl->verdicts = sel.verdicts;
  if (sel.engine == nullptr) {
    return Status(Code::not_supported,
                  std::string("no engine serves this problem on this target:\n") +
                      verdict_lines(sel.verdicts));
  }
  impl->engine = sel.engine->name();
  Result<std::unique_ptr<const detail::LaunchPlan>> launch =
      sel.engine->plan(impl->facts, target, impl->workspace);
  if (!launch) return launch.status();
  if (impl->workspace.overflowed()) {
    return Status(Code::invalid_problem,
                  "workspace: engine " + impl->engine +
                      " would need more than 2^63 bytes; the problem's sizes overflow 64 bits");
  }
  impl->launch = std::move(*launch);
  if (!impl->launch) {
    return Status(Code::internal, "engine " + impl->engine + " accepted but built no plan");
  }
  for (int i = 0; i < kTensorCount; ++i) {
    const auto id = static_cast<TensorId>(i);
    if (impl->facts.has(id)) {
      impl->alignment[i] = impl->launch->pointer_alignment(id, impl->facts);
      impl->span_bytes[i] = impl->facts.t(id).span_bytes();
    }
  }
  Plan plan;
  plan.impl_ = std::move(impl);
  return plan;
}

const std::string& Plan::engine() const {
  return (impl_ ? *impl_ : empty_impl()).engine;
}
size_t Plan::workspace_bytes() const {
  return impl_ ? impl_->workspace.total_bytes() : 0;
}
const std::vector<WorkspaceChunk>& Plan::workspace_chunks() const {
  return (impl_ ? *impl_ : empty_impl()).workspace.chunks();
}
const std::vector<EngineVerdict>& Plan::verdicts() const {
  return (impl_ ? *impl_ : empty_impl()).verdicts;
}
const Problem& Plan::problem() const {
  return (impl_ ? *impl_ : empty_impl()).problem;
}
const Target& Plan::target() const {
  return (impl_ ? *impl_ : empty_impl()).target;
}

std::string Plan::explain() const {
  if (!impl_) return "engine: none\n";
  const std::string plan = impl_->launch ? impl_->launch->describe() : std::string();
  return "engine: " + impl_->engine + "\n" + verdict_lines(impl_->verdicts) +
         (plan.empty() ? "" : "plan: " + plan + "\n");
}

Status Plan::execute(const Arguments& args, void* workspace, size_t workspace_size,
                     Stream stream) const {
  if (!impl_)
    return Status(Code::invalid_argument, "plan: empty (built by default, not by build())");
  const detail::PlanImpl& p = *impl_;
  if (!p.target.executable) {
    return Status(Code::not_supported, "plan target: sm_" + std::to_string(p.target.arch) +
                                           " was planned without a device; it cannot execute");
  }
  for (int i = 0; i < kTensorCount; ++i) {
    const auto id = static_cast<TensorId>(i);
    void* ptr = args.ptr[i];
    if (p.facts.has(id)) {
      if (ptr == nullptr) {
        return Status(Code::invalid_argument,
                      std::string("argument '") + to_string(id) + "': null, the plan declares it");
      }
      if (reinterpret_cast<uintptr_t>(ptr) % p.alignment[i] != 0) {
        return Status(Code::invalid_argument,
                      std::string("argument '") + to_string(id) + "': must be aligned to " +
                          std::to_string(p.alignment[i]) + " bytes for engine " + p.engine);
      }
    } else if (ptr != nullptr) {
      return Status(Code::invalid_argument, std::string("argument '") + to_string(id) +
                                                "': given, but the plan does not declare it");
    }
  }
  if (Status st = detail::check_aliasing(p, args); !st) return st;
  const size_t need = p.workspace.total_bytes();
  if (need > 0) {
    if (workspace == nullptr) {
      return Status(Code::workspace,
                    "workspace: null, the plan needs " + std::to_string(need) + " bytes");
    }
    if (workspace_size < need) {
      return Status(Code::workspace, "workspace: " + std::to_string(workspace_size) +
                                         " bytes given, the plan needs " + std::to_string(need));
    }
    if (reinterpret_cast<uintptr_t>(workspace) % kWorkspaceAlignment != 0) {
      return Status(Code::workspace, "workspace: must be aligned to " +
                                         std::to_string(kWorkspaceAlignment) + " bytes");
    }
  }
  if (p.target.kind == Target::Kind::cuda) {
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess || current != p.target.device) {
      return Status(Code::invalid_argument,
                    "plan target: built for CUDA device " + std::to_string(p.target.device) +
                        ", the current device is " + std::to_string(current));
    }
  }
  return p.launch->launch(p.facts, args, detail::Workspace(workspace, p.workspace.chunks()),
                          stream);
}

std::vector<std::string> engine_names() {
  std::vector<std::string> names;
  for (const auto* e : detail::ranked_engines()) names.emplace_back(e->name());
  return names;
}

}  // namespace floe
