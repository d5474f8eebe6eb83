#include "engines/generic/generic_launch_plan.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "engines/generic/generic_kernels.h"
#include "engines/serving_sides.h"

namespace floe::detail::generic {
namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The tensors the kernels address through a TensorArg: the side a ragged problem packs each on
// (query: q, o, stats, dO, dQ; keys: k, v, dK, dV), and whether only the backward reads or
// writes it.
enum class Side { none, query, key };
struct Operand {
  TensorId id;
  TensorArg Params::*arg;
  Side side;
  bool backward;
};
constexpr Operand kOperands[] = {
    {TensorId::q, &Params::q, Side::query, false},
    {TensorId::k, &Params::k, Side::key, false},
    {TensorId::v, &Params::v, Side::key, false},
    {TensorId::o, &Params::o, Side::query, false},
    {TensorId::stats, &Params::stats, Side::query, false},
    {TensorId::bias, &Params::bias, Side::none, false},
    {TensorId::sink, &Params::sink, Side::none, false},
    {TensorId::d_o, &Params::d_o, Side::query, true},
    {TensorId::dq, &Params::dq, Side::query, true},
    {TensorId::dk, &Params::dk, Side::key, true},
    {TensorId::dv, &Params::dv, Side::key, true},
    {TensorId::dbias, &Params::dbias, Side::none, true},
    {TensorId::dsink, &Params::dsink, Side::none, true},
};

// Products of dims fit comfortably in int64 below this bound (device index arithmetic too).
constexpr double kIndexLimit = 4.0e18;

TensorArg arg_of(const Facts& f, TensorId id) {
  TensorArg a;
  if (!f.has(id)) return a;
  const TensorDesc& d = f.t(id);
  for (int i = 0; i < d.rank; ++i) a.s[i] = d.strides[i];
  return a;
}

// A tensor of a ragged side, [T, H, D] (stats [T, H]), as the kernels' [B, H, S, D] with a zero
// batch stride: the token stride is the row stride and each batch's rows start at its slot.
TensorArg ragged_arg_of(const Facts& f, TensorId id) {
  TensorArg a;
  if (!f.has(id)) return a;
  const TensorDesc& d = f.t(id);
  a.s[0] = 0;
  a.s[1] = d.strides[1];
  a.s[2] = d.strides[0];
  a.s[3] = d.rank > 2 ? d.strides[2] : 0;
  return a;
}

KernelGrid grid_of(int64_t blocks) {
  KernelGrid g;
  g.blocks = blocks;
  // Each CUDA block walks logical blocks gridDim.x apart: any count fits the x limit.
  g.grid = static_cast<unsigned>(std::min<int64_t>(blocks, std::numeric_limits<int32_t>::max()));
  return g;
}

}  // namespace

// Ragged sides (both directions) and paged caches of any page size are served (DESIGN 2.1,
// 2.2): nothing to decline for them.
std::string check_target(const Target& target) {
  if (target.kind != Target::Kind::cuda) return "runs on CUDA devices only";
  if (target.arch < 80) {
    return "needs compute capability 8.0 or newer (target is sm_" + std::to_string(target.arch) +
           ")";
  }
  if (!kernels_built_for(target.arch)) {
    return "no kernels built for sm_" + std::to_string(target.arch) + " (this build has " +
           built_archs() + ")";
  }
  return "";
}

std::string decline_reason(const Facts& f, const Target& target) {
  if (std::string why = check_target(target); !why.empty()) return why;
  // Tile indices are int: an extent within a tile of 2^31 would overflow them.
  constexpr int64_t kMaxExtent = (int64_t{1} << 31) - 1 - 2 * kTile;
  if (std::max({f.s_q, f.s_kv, f.d_qk, f.d_v}) > kMaxExtent) {
    return "s_q, s_kv, d_qk and d_v must not exceed 2^31 - 129";
  }
  // Logical block counts and element offsets are int64: refuse sizes no device could hold.
  double worst = static_cast<double>(f.b) * static_cast<double>(f.h_q) *
                 static_cast<double>(std::max(f.s_q, f.s_kv)) *
                 static_cast<double>(std::max({f.d_qk, f.d_v, f.s_q, f.s_kv}));
  for (int i = 0; i < kTensorCount; ++i) {
    const auto id = static_cast<TensorId>(i);
    if (f.has(id)) worst = std::max(worst, static_cast<double>(f.t(id).span()));
  }
  if (worst > kIndexLimit) return "problem too large for 64-bit element indexing";
  return "";
}

Params make_params(const Facts& f) {
  Params p;
  for (const Operand& op : kOperands) {
    const bool ragged =
        (op.side == Side::query && f.ragged_q) || (op.side == Side::key && f.ragged_kv);
    p.*op.arg = ragged ? ragged_arg_of(f, op.id) : arg_of(f, op.id);
  }
  p.lens.q_stride = arg_of(f, TensorId::seq_len_q).s[0];
  p.lens.kv_stride = arg_of(f, TensorId::seq_len_kv).s[0];
  p.ragged_q = f.ragged_q;
  p.ragged_kv = f.ragged_kv;
  p.paged_kv = f.paged_kv;
  if (f.ragged_q) p.rq = ragged_side(f, /*query=*/true);
  if (f.ragged_kv) p.rkv = ragged_side(f, /*query=*/false);
  if (f.paged_kv) p.pages = paged_side(f);

  set_problem_fields(f, p);
  p.has_bias = f.has(TensorId::bias);
  if (p.has_bias) {
    p.bias_b = f.t(TensorId::bias).dims[0];
    p.bias_h = f.t(TensorId::bias).dims[1];
    // A broadcast dim is read at index 0 whatever (b, h) asks for.
    if (p.bias_b == 1) p.bias.s[0] = 0;
    if (p.bias_h == 1) p.bias.s[1] = 0;
  }
  p.has_dbias = f.has(TensorId::dbias);
  p.has_dsink = f.has(TensorId::dsink);

  p.n_qt = ceil_div(f.s_q, kTile);
  p.n_kt = ceil_div(f.s_kv, kTile);
  p.fwd_cols = f.d_v <= 64 ? 64 : 128;
  p.fwd_nc = ceil_div(f.d_v, p.fwd_cols);
  p.n_ck = ceil_div(f.d_qk, kDChunk);
  p.n_cv = ceil_div(f.d_v, kDChunk);
  return p;
}

Geometry make_geometry(const Facts& f, const Params& p) {
  Geometry g;
  g.bf16 = f.dtype == DType::bf16;
  if (!f.backward()) {
    g.forward = grid_of(f.b * f.h_q * p.n_qt * p.fwd_nc);
    return g;
  }
  g.delta = grid_of(ceil_div(f.b * f.h_q * f.s_q, kDeltaRowsPerBlock));
  if (p.has_dsink) g.dsink = grid_of(f.h_q);
  g.dkdv = grid_of(f.b * f.h_kv * p.n_kt * std::max(p.n_ck, p.n_cv));
  g.dq = grid_of(f.b * f.h_q * p.n_qt * p.n_ck);
  if (p.has_dbias) g.dbias = grid_of(p.bias_b * p.bias_h * p.n_qt * p.n_kt);
  return g;
}

void add_workspace(const Facts& f, WorkspaceLayout& workspace) {
  if (!f.backward()) return;
  workspace.add(kDeltaChunk, saturating_bytes({f.b, f.h_q, f.s_q, int64_t{sizeof(float)}}));
}

Status GenericLaunchPlan::launch(const Facts& facts, const Arguments& args, const Workspace& ws,
                                 Stream stream) const {
  Params p = params_;
  for (const Operand& op : kOperands) {
    if (!op.backward || facts.backward()) (p.*op.arg).ptr = args.get(op.id);
  }
  p.lens.q = static_cast<const int32_t*>(args.get(TensorId::seq_len_q));
  p.lens.kv = static_cast<const int32_t*>(args.get(TensorId::seq_len_kv));
  p.rq.offsets = args.get(TensorId::offsets_q);
  p.rq.seq_len = p.lens.q;
  p.rkv.offsets = args.get(TensorId::offsets_kv);
  p.rkv.seq_len = p.lens.kv;
  p.pages.table = static_cast<const int32_t*>(args.get(TensorId::block_table));
  if (!facts.backward()) return launch_forward(p, geometry_, stream);

  p.delta = ws.carve<float>(kDeltaChunk);
  if (p.delta == nullptr) {
    return Status(Code::internal, "generic: the plan has no workspace chunk 'delta'");
  }
  return launch_backward(p, geometry_, stream);
}

}  // namespace floe::detail::generic
