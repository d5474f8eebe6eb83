#include "engines/sm80/fwd_plan.h"

#include <cuda_runtime_api.h>

#include "engines/sm80/fwd_kernels.h"
#include "engines/sm80/fwd_params.h"
#include "engines/sm80/fwd_tiles.h"
#include "engines/tensor_core_rules.h"

namespace floe::detail::sm80 {
namespace {

// What the engine would run: the tile, and whether the scores need the score-mod kernel.
struct FwdChoice {
  HeadDimTile tile = HeadDimTile::d128;
  bool score_mod = false;
  const FwdKernel* kernel = nullptr;
};

std::string choose_forward(const Facts& f, const Target& target, FwdChoice* out) {
  if (std::string why = check_target(target); !why.empty()) return why;
  if (f.backward()) return "internal: the forward chooser got a backward problem";
  if (std::string why = check_head_dims(f); !why.empty()) return why;
  FwdChoice c;
  c.tile = head_dim_tile_for(f.d_qk, f.d_v);
  c.score_mod = needs_score_mod(f);
  const FwdTileShape& shape = fwd_tile_shape(c.tile);
  for (TensorId id : {TensorId::q, TensorId::o}) {
    if (std::string why = check_operand(f, id, shape.block_m); !why.empty()) return why;
  }
  for (TensorId id : {TensorId::k, TensorId::v}) {
    if (std::string why = check_operand(f, id, shape.block_n); !why.empty()) return why;
  }
  if (std::string why = check_bias(f, TensorId::bias); !why.empty()) return why;
  const int64_t m_blocks = (f.s_q + shape.block_m - 1) / shape.block_m;
  if (m_blocks * f.h_q * f.b > kInt32Max) {
    return "grid: " + std::to_string(m_blocks * f.h_q * f.b) +
           " query tiles exceed sm80's 2^31 - 1 CTAs";
  }
  c.kernel = find_fwd_kernel(c.tile, f.dtype, c.score_mod);
  if (std::string why = check_kernel(c.kernel, std::string("tile ") + head_dim_tile_name(c.tile),
                                     f.dtype, c.score_mod, target);
      !why.empty()) {
    return why;
  }
  if (out != nullptr) *out = c;
  return "";
}

FwdParams make_params(const Facts& f, const FwdChoice& c) {
  FwdParams p;
  strides_of(f, TensorId::q, &p.q_stride_b, &p.q_stride_h, &p.q_stride_s);
  strides_of(f, TensorId::k, &p.k_stride_b, &p.k_stride_h, &p.k_stride_s);
  strides_of(f, TensorId::v, &p.v_stride_b, &p.v_stride_h, &p.v_stride_s);
  strides_of(f, TensorId::o, &p.o_stride_b, &p.o_stride_h, &p.o_stride_s);
  if (f.has(TensorId::stats))
    strides_of(f, TensorId::stats, &p.stats_stride_b, &p.stats_stride_h, &p.stats_stride_s);
  if (f.has(TensorId::bias)) {
    strides_of(f, TensorId::bias, &p.bias_stride_b, &p.bias_stride_h, &p.bias_stride_s);
    if (f.bias_broadcast_b() || f.t(TensorId::bias).dims[0] == 1) p.bias_stride_b = 0;
    if (f.bias_broadcast_h() || f.t(TensorId::bias).dims[1] == 1) p.bias_stride_h = 0;
  }
  p.b = static_cast<int32_t>(f.b);
  p.s_q = static_cast<int32_t>(f.s_q);
  p.s_kv = static_cast<int32_t>(f.s_kv);
  p.d_qk = static_cast<int32_t>(f.d_qk);
  p.d_v = static_cast<int32_t>(f.d_v);
  fill_scores(f, p);
  const FwdTileShape& shape = fwd_tile_shape(c.tile);
  // Bounded on the right only (causal and the like): later query tiles see more keys.
  p.heavy_last_m = f.mask.right.has_value() && !f.mask.left.has_value();
  p.m_blocks_div =
      kernels::FastDivisor(static_cast<uint32_t>((f.s_q + shape.block_m - 1) / shape.block_m));
  p.h_q_div = kernels::FastDivisor(static_cast<uint32_t>(f.h_q));
  p.group_div = kernels::FastDivisor(static_cast<uint32_t>(f.group));
  return p;
}

class Sm80ForwardPlan final : public LaunchPlan {
 public:
  Sm80ForwardPlan(const FwdParams& params, const FwdKernel* kernel, unsigned grid)
      : params_(params), kernel_(kernel), grid_(grid) {}

  Status launch(const Facts& facts, const Arguments& args, const Workspace&,
                Stream stream) const override {
    FwdParams p = params_;
    set_shared_pointers(facts, args, p);
    if (facts.has(TensorId::stats)) p.stats = static_cast<float*>(args.get(TensorId::stats));
    return launch_status(kernel_->name, kernel_->launch(p, grid_, stream));
  }

  size_t pointer_alignment(TensorId id, const Facts& facts) const override {
    return is_row_operand(id) ? 16 : LaunchPlan::pointer_alignment(id, facts);
  }

 private:
  FwdParams params_;
  const FwdKernel* kernel_;
  unsigned grid_;
};

}  // namespace

std::string forward_decline_reason(const Facts& facts, const Target& target) {
  return choose_forward(facts, target, nullptr);
}

Result<std::unique_ptr<const LaunchPlan>> plan_forward(const Facts& facts, const Target& target) {
  FwdChoice c;
  if (std::string why = choose_forward(facts, target, &c); !why.empty()) {
    return Status(Code::internal, "sm80 accepted, then declined: " + why);
  }
  const FwdParams params = make_params(facts, c);
  const unsigned grid =
      static_cast<unsigned>(static_cast<int64_t>(params.m_blocks_div.d) * facts.h_q * facts.b);
  if (Status st = prepare_on_device(*c.kernel, target); !st) return st;
  return std::unique_ptr<const LaunchPlan>(
      std::make_unique<Sm80ForwardPlan>(params, c.kernel, grid));
}

}  // namespace floe::detail::sm80
