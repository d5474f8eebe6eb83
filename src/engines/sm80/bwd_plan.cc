#include "engines/sm80/bwd_plan.h"

#include <cuda_runtime_api.h>

#include "engines/sm80/bwd_kernels.h"
#include "engines/sm80/bwd_params.h"
#include "engines/sm80/bwd_tiles.h"
#include "engines/sm80/serving_plan.h"
#include "engines/sm80/sm80_rules.h"

namespace floe::detail::sm80 {
namespace {

using BwdChoice = TileChoice<BwdKernel, BwdTile>;

std::string choose_backward(const Facts& f, const Target& target, BwdChoice* out) {
  BwdChoice c;
  if (std::string why = choose_tile(f, target, bwd_tile_for, c); !why.empty()) return why;
  const BwdTileShape& shape = bwd_tile_shape(c.tile);
  if (f.paged_kv) {  // validation refuses it first; kept so that the rule has one home here too
    return "paged_kv: a backward over a paged KV cache is not defined (DESIGN 2.2)";
  }
  // Ragged sides: the serving instantiations, with their tensors' own layouts.
  if (std::string why =
          f.serving() ? check_serving_operands(
                            f, {TensorId::q, TensorId::o, TensorId::d_o, TensorId::dq},
                            shape.block_m, {TensorId::k, TensorId::v, TensorId::dk, TensorId::dv},
                            shape.block_n, {TensorId::bias, TensorId::dbias})
                      : check_operands(
                            kEngine, f, {TensorId::q, TensorId::o, TensorId::d_o, TensorId::dq},
                            shape.block_m, {TensorId::k, TensorId::v, TensorId::dk, TensorId::dv},
                            shape.block_n, {TensorId::bias, TensorId::dbias});
      !why.empty()) {
    return why;
  }
  const int64_t m_blocks = (f.s_q + shape.block_m - 1) / shape.block_m;
  const int64_t n_blocks = (f.s_kv + shape.block_n - 1) / shape.block_n;
  if (m_blocks * f.h_q * f.b > kInt32Max || n_blocks * f.h_kv * f.b > kInt32Max ||
      m_blocks * n_blocks * f.h_q * f.b > kInt32Max) {
    return "grid: the query or key tiles exceed sm80's 2^31 - 1 CTAs";
  }
  c.kernel = find_bwd_kernel(c.tile, f.dtype, c.score_mod, f.serving());
  if (std::string why =
          check_kernel(c.kernel,
                       std::string(f.serving() ? "backward serving tile " : "backward tile ") +
                           bwd_tile_name(c.tile),
                       f.dtype, c.score_mod, target);
      !why.empty()) {
    return why;
  }
  if (out != nullptr) *out = c;
  return "";
}

constexpr const char* kDqAccumChunk = "dq_accum";
constexpr const char* kLseChunk = "lse_log2";
constexpr const char* kDeltaChunk = "delta";
constexpr const char* kDqSemaphoreChunk = "dq_semaphore";
constexpr const char* kDbiasAccumChunk = "dbias_accum";
constexpr const char* kDbiasSemaphoreChunk = "dbias_semaphore";

// A bias gradient broadcast over the batch or the heads is a sum over several main-kernel CTAs
// (bwd_dbias_sum.cuh); one per (batch, head) is written by the CTA that computes it.
bool dbias_summed(const Facts& f, const BwdParams& p) {
  return f.has(TensorId::dbias) && ((p.bias_b == 1 && p.b > 1) || (p.bias_h == 1 && p.h_q > 1));
}

BwdParams make_bwd_params(const Facts& f, const BwdChoice& c) {
  BwdParams p;
  fill_forward_strides(f, p);
  p.do_strides = serving_strides_of(f, TensorId::d_o);
  p.dq_strides = serving_strides_of(f, TensorId::dq);
  p.dk_strides = serving_strides_of(f, TensorId::dk);
  p.dv_strides = serving_strides_of(f, TensorId::dv);
  p.dbias_strides = strides_of(f, TensorId::dbias);
  if (f.has(TensorId::dsink)) p.dsink_stride = f.t(TensorId::dsink).strides[0];
  if (f.has(TensorId::bias)) {
    p.bias_b = static_cast<int32_t>(f.t(TensorId::bias).dims[0]);
    p.bias_h = static_cast<int32_t>(f.t(TensorId::bias).dims[1]);
  }
  p.h_q = static_cast<int32_t>(f.h_q);
  p.h_kv = static_cast<int32_t>(f.h_kv);
  p.group = static_cast<int32_t>(f.group);
  p.scale = static_cast<float>(f.scale);
  fill_shared(f, p);
  const BwdTileShape& shape = bwd_tile_shape(c.tile);
  p.num_m_blocks = static_cast<int32_t>((f.s_q + shape.block_m - 1) / shape.block_m);
  p.num_n_blocks = static_cast<int32_t>((f.s_kv + shape.block_n - 1) / shape.block_n);
  p.query_tiles = kernels::QueryTileScheduler::make(p.num_m_blocks, f.h_q, false);
  p.s_q_pad = p.num_m_blocks * shape.block_m;
  p.dq_ld = shape.d_qk;
  p.deterministic = f.deterministic;
  if (f.serving()) p.serve = make_serving_rows(f, shape.block_n);
  if (f.ragged_q) {
    p.ws_packed = true;
    p.ws_tiles = f.total_q / shape.block_m + f.b;
  }
  p.heads_inner = dbias_summed(f, p) && p.bias_h == 1 && p.group > 1;
  p.bias_vec = bias_strides_allow_vec(f, shape.block_m);
  p.dbias_vec = bias_strides_allow_vec(f, shape.block_m, TensorId::dbias);
  return p;
}

// Every temporary is a named chunk: O(B * H * S * D) (O(H * (Tq + B * block_m) * D) for a
// ragged query side, whose rows are packed: bwd_params.h's ws_row), the fp32 dQ accumulator,
// the LSE (log2 units) and Delta per row, and in deterministic mode one semaphore per query
// tile; with a broadcast bias gradient, an fp32 partial sum of the bias's shape over whole tiles
// (twice the bytes of a 2-byte dBias) and one semaphore per tile of it.
void add_bwd_workspace(const Facts& f, const BwdParams& p, int block_m, int block_n,
                       WorkspaceLayout& ws) {
  // Saturating products: a size that overflows makes the plan's total overflow, which
  // Plan::build refuses, instead of wrapping to a small workspace.
  const int64_t f32 = sizeof(float);
  // (A saturated row count turns negative here, which saturates the products below.)
  const auto rows =
      static_cast<int64_t>(p.ws_packed ? saturating_bytes({f.h_q, p.ws_tiles, block_m})
                                       : saturating_bytes({f.b, f.h_q, p.s_q_pad}));
  ws.add(kDqAccumChunk, saturating_bytes({rows, p.dq_ld, f32}));
  ws.add(kLseChunk, saturating_bytes({rows, f32}));
  ws.add(kDeltaChunk, saturating_bytes({rows, f32}));
  if (f.deterministic) {
    ws.add(kDqSemaphoreChunk,
           saturating_bytes({f.b, f.h_q, p.num_m_blocks, int64_t{sizeof(int32_t)}}));
  }
  if (dbias_summed(f, p)) {
    ws.add(kDbiasAccumChunk, saturating_bytes({p.bias_b, p.bias_h, p.s_q_pad,
                                               int64_t{p.num_n_blocks} * block_n, f32}));
    ws.add(kDbiasSemaphoreChunk, saturating_bytes({p.bias_b, p.bias_h, p.num_m_blocks,
                                                   p.num_n_blocks, int64_t{sizeof(int32_t)}}));
  }
}

class Sm80BackwardPlan final : public TensorCoreLaunchPlan {
 public:
  Sm80BackwardPlan(const BwdParams& params, const BwdKernel* kernel, BwdTile tile,
                   const BwdGrids& grids, bool dbias_summed)
      : params_(params), kernel_(kernel), tile_(tile), grids_(grids), dbias_summed_(dbias_summed) {}

  Status launch(const Facts& facts, const Arguments& args, const Workspace& ws,
                Stream stream) const override {
    BwdParams p = params_;
    set_shared_pointers(facts, args, p);
    p.d_o = args.get(TensorId::d_o);
    p.stats = static_cast<const float*>(args.get(TensorId::stats));
    p.dq = args.get(TensorId::dq);
    p.dk = args.get(TensorId::dk);
    p.dv = args.get(TensorId::dv);
    if (facts.has(TensorId::dbias)) {
      (dbias_summed_ ? p.dbias_sum : p.dbias) = args.get(TensorId::dbias);
    }
    if (facts.has(TensorId::dsink)) p.dsink = static_cast<float*>(args.get(TensorId::dsink));
    if (facts.serving()) set_serving_pointers(facts, args, p.serve);
    p.dq_accum = ws.carve<float>(kDqAccumChunk);
    p.lse_log2 = ws.carve<float>(kLseChunk);
    p.delta = ws.carve<float>(kDeltaChunk);
    p.dq_sem = ws.carve<int32_t>(kDqSemaphoreChunk);
    p.dbias_accum = ws.carve<float>(kDbiasAccumChunk);
    p.dbias_sem = ws.carve<int32_t>(kDbiasSemaphoreChunk);
    p.bias_vec = p.bias_vec && bias_pointer_allows_vec(p.bias);
    p.dbias_vec = p.dbias_vec && bias_pointer_allows_vec(p.dbias);
    return launch_status(kEngine, kernel_->name, kernel_->launch(p, grids_, stream));
  }

  std::string describe() const override {
    const BwdTileShape& s = bwd_tile_shape(tile_);
    return std::string(kernel_->name) + ": tile " + bwd_tile_name(tile_) + ", " +
           std::to_string(s.block_n) + " keys per CTA x " + std::to_string(s.block_m) +
           "-query visits, " + std::to_string(s.warps) + " warps, " + std::to_string(s.q_stages) +
           " Q/dO stages, " + std::to_string(s.smem_bytes() / 1024) + " KB shared memory, " +
           std::to_string(grids_.key_tiles) + " CTAs";
  }

 private:
  BwdParams params_;
  const BwdKernel* kernel_;
  BwdTile tile_;
  BwdGrids grids_;
  bool dbias_summed_;
};

}  // namespace

std::string backward_decline_reason(const Facts& facts, const Target& target) {
  return choose_backward(facts, target, nullptr);
}

Result<std::unique_ptr<const LaunchPlan>> plan_backward(const Facts& facts, const Target& target,
                                                        WorkspaceLayout& workspace) {
  const Result<BwdChoice> c = tensor_core::accepted_choice<BwdChoice>(
      kEngine, [&](BwdChoice* out) { return choose_backward(facts, target, out); });
  if (!c) return c.status();
  const BwdParams params = make_bwd_params(facts, *c);
  add_bwd_workspace(facts, params, bwd_tile_shape(c->tile).block_m, bwd_tile_shape(c->tile).block_n,
                    workspace);
  BwdGrids grids;
  grids.query_tiles =
      static_cast<unsigned>(kernels::QueryTileScheduler::grid(params.query_tiles, facts.b));
  grids.key_tiles =
      static_cast<unsigned>(static_cast<int64_t>(params.num_n_blocks) * facts.h_kv * facts.b);
  grids.heads = static_cast<unsigned>(facts.h_q);
  return tensor_core::prepared_plan<Sm80BackwardPlan>(
      kEngine, *c->kernel, target, params, c->kernel, c->tile, grids, dbias_summed(facts, params));
}

}  // namespace floe::detail::sm80
