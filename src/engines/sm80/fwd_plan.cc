#include "engines/sm80/fwd_plan.h"

#include <cuda_runtime_api.h>

#include "engines/sm80/fwd_kernels.h"
#include "engines/sm80/fwd_params.h"
#include "engines/sm80/fwd_tiles.h"
#include "engines/sm80/serving_plan.h"
#include "engines/sm80/sm80_rules.h"

namespace floe::detail::sm80 {
namespace {

using FwdChoice = TileChoice<FwdKernel, FwdTile>;

std::string choose_forward(const Facts& f, const Target& target, FwdChoice* out) {
  if (f.backward()) return "internal: the forward chooser got a backward problem";
  FwdChoice c;
  if (std::string why = choose_tile(f, target, fwd_tile_for, c); !why.empty()) return why;
  const FwdTileShape& shape = fwd_tile_shape(c.tile);
  // Ragged sides and paged K/V: the serving instantiations, with their tensors' own layouts.
  if (std::string why =
          f.serving()
              ? check_serving_operands(f, {TensorId::q, TensorId::o}, shape.block_m,
                                       {TensorId::k, TensorId::v}, shape.block_n, {TensorId::bias})
              : check_operands(kEngine, f, {TensorId::q, TensorId::o}, shape.block_m,
                               {TensorId::k, TensorId::v}, shape.block_n, {TensorId::bias});
      !why.empty()) {
    return why;
  }
  const int64_t m_blocks = (f.s_q + shape.block_m - 1) / shape.block_m;
  if (m_blocks * f.h_q * f.b > kInt32Max) {
    return "grid: " + std::to_string(m_blocks * f.h_q * f.b) +
           " query tiles exceed sm80's 2^31 - 1 CTAs";
  }
  c.kernel = find_fwd_kernel(c.tile, f.dtype, c.score_mod, f.serving());
  if (std::string why = check_kernel(
          c.kernel, std::string(f.serving() ? "serving tile " : "tile ") + fwd_tile_name(c.tile),
          f.dtype, c.score_mod, target);
      !why.empty()) {
    return why;
  }
  if (out != nullptr) *out = c;
  return "";
}

FwdParams make_params(const Facts& f, const FwdChoice& c) {
  FwdParams p;
  fill_forward_strides(f, p);
  fill_shared(f, p);
  const FwdTileShape& shape = fwd_tile_shape(c.tile);
  // Bounded on the right only (causal and the like): later query tiles see more keys.
  p.tiles = kernels::QueryTileScheduler::make((f.s_q + shape.block_m - 1) / shape.block_m, f.h_q,
                                              f.mask.right.has_value() && !f.mask.left.has_value());
  p.group_div = kernels::FastDivisor(static_cast<uint32_t>(f.group));
  if (f.serving()) {
    p.serve = make_serving_rows(f, shape.block_n);
    p.serve_tiles = kernels::PersistentTileScheduler::make(
        (f.s_q + shape.block_m - 1) / shape.block_m, f.h_q, f.b,
        f.mask.right.has_value() && !f.mask.left.has_value(), /*lpt=*/true);
  }
  p.bias_vec = bias_strides_allow_vec(f, shape.block_m);
  return p;
}

class Sm80ForwardPlan final : public TensorCoreLaunchPlan {
 public:
  Sm80ForwardPlan(const FwdParams& params, const FwdKernel* kernel, FwdTile tile, unsigned grid)
      : params_(params), kernel_(kernel), tile_(tile), grid_(grid) {}

  Status launch(const Facts& facts, const Arguments& args, const Workspace&,
                Stream stream) const override {
    FwdParams p = params_;
    set_shared_pointers(facts, args, p);
    if (facts.has(TensorId::stats)) p.stats = static_cast<float*>(args.get(TensorId::stats));
    if (facts.serving()) set_serving_pointers(facts, args, p.serve);
    p.bias_vec = p.bias_vec && bias_pointer_allows_vec(p.bias);
    return launch_status(kEngine, kernel_->name, kernel_->launch(p, grid_, stream));
  }

  std::string describe() const override {
    const FwdTileShape& s = fwd_tile_shape(tile_);
    return std::string(kernel_->name) + ": tile " + fwd_tile_name(tile_) + ", " +
           std::to_string(s.block_m) + " queries x " + std::to_string(s.block_n) + " keys, " +
           std::to_string(s.warps) + " warps, " + std::to_string(s.stages) + " K/V stages, " +
           std::to_string(s.smem_bytes() / 1024) + " KB shared memory, " + std::to_string(grid_) +
           " CTAs";
  }

 private:
  FwdParams params_;
  const FwdKernel* kernel_;
  FwdTile tile_;
  unsigned grid_;
};

}  // namespace

std::string forward_decline_reason(const Facts& facts, const Target& target) {
  return choose_forward(facts, target, nullptr);
}

Result<std::unique_ptr<const LaunchPlan>> plan_forward(const Facts& facts, const Target& target) {
  const Result<FwdChoice> c = tensor_core::accepted_choice<FwdChoice>(
      kEngine, [&](FwdChoice* out) { return choose_forward(facts, target, out); });
  if (!c) return c.status();
  const FwdParams params = make_params(facts, *c);
  const unsigned grid =
      static_cast<unsigned>(kernels::QueryTileScheduler::grid(params.tiles, facts.b));
  return tensor_core::prepared_plan<Sm80ForwardPlan>(kEngine, *c->kernel, target, params, c->kernel,
                                                     c->tile, grid);
}

}  // namespace floe::detail::sm80
