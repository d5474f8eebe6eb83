#include "engines/sm80/bwd_plan.h"

#include <cuda_runtime_api.h>

#include "engines/sm80/bwd_kernels.h"
#include "engines/sm80/bwd_params.h"
#include "engines/sm80/bwd_tiles.h"
#include "engines/tensor_core_rules.h"

namespace floe::detail::sm80 {
namespace {

struct BwdChoice {
  HeadDimTile tile = HeadDimTile::d128;
  bool score_mod = false;
  const BwdKernel* kernel = nullptr;
};

std::string choose_backward(const Facts& f, const Target& target, BwdChoice* out) {
  if (std::string why = check_target(target); !why.empty()) return why;
  if (std::string why = check_head_dims(f); !why.empty()) return why;
  BwdChoice c;
  c.tile = head_dim_tile_for(f.d_qk, f.d_v);
  c.score_mod = needs_score_mod(f);
  const BwdTileShape& shape = bwd_tile_shape(c.tile);
  for (TensorId id : {TensorId::q, TensorId::o, TensorId::d_o, TensorId::dq}) {
    if (std::string why = check_operand(f, id, shape.block_m); !why.empty()) return why;
  }
  for (TensorId id : {TensorId::k, TensorId::v, TensorId::dk, TensorId::dv}) {
    if (std::string why = check_operand(f, id, shape.block_n); !why.empty()) return why;
  }
  if (std::string why = check_bias(f, TensorId::bias); !why.empty()) return why;
  if (std::string why = check_bias(f, TensorId::dbias); !why.empty()) return why;
  const int64_t m_blocks = (f.s_q + shape.block_m - 1) / shape.block_m;
  const int64_t n_blocks = (f.s_kv + shape.block_n - 1) / shape.block_n;
  if (m_blocks * f.h_q * f.b > kInt32Max || n_blocks * f.h_kv * f.b > kInt32Max ||
      m_blocks * n_blocks * f.h_q * f.b > kInt32Max) {
    return "grid: the query or key tiles exceed sm80's 2^31 - 1 CTAs";
  }
  c.kernel = find_bwd_kernel(c.tile, f.dtype, c.score_mod);
  if (std::string why =
          check_kernel(c.kernel, std::string("backward tile ") + head_dim_tile_name(c.tile),
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

BwdParams make_bwd_params(const Facts& f, const BwdChoice& c) {
  BwdParams p;
  strides_of(f, TensorId::q, &p.q_stride_b, &p.q_stride_h, &p.q_stride_s);
  strides_of(f, TensorId::k, &p.k_stride_b, &p.k_stride_h, &p.k_stride_s);
  strides_of(f, TensorId::v, &p.v_stride_b, &p.v_stride_h, &p.v_stride_s);
  strides_of(f, TensorId::o, &p.o_stride_b, &p.o_stride_h, &p.o_stride_s);
  strides_of(f, TensorId::d_o, &p.do_stride_b, &p.do_stride_h, &p.do_stride_s);
  strides_of(f, TensorId::dq, &p.dq_stride_b, &p.dq_stride_h, &p.dq_stride_s);
  strides_of(f, TensorId::dk, &p.dk_stride_b, &p.dk_stride_h, &p.dk_stride_s);
  strides_of(f, TensorId::dv, &p.dv_stride_b, &p.dv_stride_h, &p.dv_stride_s);
  strides_of(f, TensorId::stats, &p.stats_stride_b, &p.stats_stride_h, &p.stats_stride_s);
  if (f.has(TensorId::bias)) {
    strides_of(f, TensorId::bias, &p.bias_stride_b, &p.bias_stride_h, &p.bias_stride_s);
    if (f.t(TensorId::bias).dims[0] == 1) p.bias_stride_b = 0;
    if (f.t(TensorId::bias).dims[1] == 1) p.bias_stride_h = 0;
  }
  if (f.has(TensorId::dbias)) {
    strides_of(f, TensorId::dbias, &p.dbias_stride_b, &p.dbias_stride_h, &p.dbias_stride_s);
  }
  if (f.has(TensorId::bias)) {
    p.bias_b = static_cast<int32_t>(f.t(TensorId::bias).dims[0]);
    p.bias_h = static_cast<int32_t>(f.t(TensorId::bias).dims[1]);
  }
  p.b = static_cast<int32_t>(f.b);
  p.h_q = static_cast<int32_t>(f.h_q);
  p.h_kv = static_cast<int32_t>(f.h_kv);
  p.group = static_cast<int32_t>(f.group);
  p.s_q = static_cast<int32_t>(f.s_q);
  p.s_kv = static_cast<int32_t>(f.s_kv);
  p.d_qk = static_cast<int32_t>(f.d_qk);
  p.d_v = static_cast<int32_t>(f.d_v);
  p.scale = static_cast<float>(f.scale);
  fill_scores(f, p);
  const BwdTileShape& shape = bwd_tile_shape(c.tile);
  p.num_m_blocks = static_cast<int32_t>((f.s_q + shape.block_m - 1) / shape.block_m);
  p.num_n_blocks = static_cast<int32_t>((f.s_kv + shape.block_n - 1) / shape.block_n);
  p.s_q_pad = p.num_m_blocks * shape.block_m;
  p.dq_ld = shape.d_qk;
  p.deterministic = f.deterministic;
  return p;
}

// Every temporary is a named chunk, O(B * H * S * D): the fp32 dQ accumulator, the dense
// LSE (log2 units) and Delta, and in deterministic mode one semaphore per query tile.
void add_bwd_workspace(const Facts& f, const BwdParams& p, WorkspaceLayout& ws) {
  const size_t rows = static_cast<size_t>(f.b * f.h_q) * static_cast<size_t>(p.s_q_pad);
  ws.add(kDqAccumChunk, rows * static_cast<size_t>(p.dq_ld) * sizeof(float));
  ws.add(kLseChunk, rows * sizeof(float));
  ws.add(kDeltaChunk, rows * sizeof(float));
  if (f.deterministic) {
    ws.add(kDqSemaphoreChunk, static_cast<size_t>(f.b * f.h_q) *
                                  static_cast<size_t>(p.num_m_blocks) * sizeof(int32_t));
  }
}

class Sm80BackwardPlan final : public LaunchPlan {
 public:
  Sm80BackwardPlan(const BwdParams& params, const BwdKernel* kernel, const BwdGrids& grids)
      : params_(params),
        kernel_(kernel),
        grids_(grids),
        // A broadcast bias's gradient is a sum over CTAs: its own kernel (bwd_dbias.cuh).
        dbias_summed_((params.bias_b == 1 && params.b > 1) ||
                      (params.bias_h == 1 && params.h_q > 1)) {}

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
    p.dq_accum = ws.carve<float>(kDqAccumChunk);
    p.lse_log2 = ws.carve<float>(kLseChunk);
    p.delta = ws.carve<float>(kDeltaChunk);
    p.dq_sem = ws.carve<int32_t>(kDqSemaphoreChunk);
    return launch_status(kernel_->name, kernel_->launch(p, grids_, stream));
  }

  size_t pointer_alignment(TensorId id, const Facts& facts) const override {
    return is_row_operand(id) ? 16 : LaunchPlan::pointer_alignment(id, facts);
  }

 private:
  BwdParams params_;
  const BwdKernel* kernel_;
  BwdGrids grids_;
  bool dbias_summed_;
};

}  // namespace

std::string backward_decline_reason(const Facts& facts, const Target& target) {
  return choose_backward(facts, target, nullptr);
}

Result<std::unique_ptr<const LaunchPlan>> plan_backward(const Facts& facts, const Target& target,
                                                        WorkspaceLayout& workspace) {
  BwdChoice c;
  if (std::string why = choose_backward(facts, target, &c); !why.empty()) {
    return Status(Code::internal, "sm80 accepted, then declined: " + why);
  }
  const BwdParams params = make_bwd_params(facts, c);
  add_bwd_workspace(facts, params, workspace);
  BwdGrids grids;
  grids.query_tiles =
      static_cast<unsigned>(static_cast<int64_t>(params.num_m_blocks) * facts.h_q * facts.b);
  grids.key_tiles =
      static_cast<unsigned>(static_cast<int64_t>(params.num_n_blocks) * facts.h_kv * facts.b);
  grids.heads = static_cast<unsigned>(facts.h_q);
  grids.bias_tiles = static_cast<unsigned>(static_cast<int64_t>(params.num_m_blocks) *
                                           params.num_n_blocks * params.bias_b * params.bias_h);
  if (Status st = prepare_on_device(*c.kernel, target); !st) return st;
  return std::unique_ptr<const LaunchPlan>(
      std::make_unique<Sm80BackwardPlan>(params, c.kernel, grids));
}

}  // namespace floe::detail::sm80
