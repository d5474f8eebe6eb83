#include "engines/generic/generic_launch_plan.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "engines/generic/generic_kernels.h"
#include "engines/serving_sides.h"
#include "kernels/constants.h"

namespace floe::detail::generic {
namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

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
  p.q = arg_of(f, TensorId::q);
  p.k = arg_of(f, TensorId::k);
  p.v = arg_of(f, TensorId::v);
  p.o = arg_of(f, TensorId::o);
  p.stats = arg_of(f, TensorId::stats);
  p.bias = arg_of(f, TensorId::bias);
  p.d_o = arg_of(f, TensorId::d_o);
  p.dq = arg_of(f, TensorId::dq);
  p.dk = arg_of(f, TensorId::dk);
  p.dv = arg_of(f, TensorId::dv);
  p.dbias = arg_of(f, TensorId::dbias);
  p.sink = arg_of(f, TensorId::sink);
  p.dsink = arg_of(f, TensorId::dsink);
  p.lens.q_stride = arg_of(f, TensorId::seq_len_q).s[0];
  p.lens.kv_stride = arg_of(f, TensorId::seq_len_kv).s[0];
  p.ragged_q = f.ragged_q;
  p.ragged_kv = f.ragged_kv;
  p.paged_kv = f.paged_kv;
  if (f.ragged_q) {
    for (TensorId id : {TensorId::q, TensorId::o, TensorId::stats, TensorId::d_o, TensorId::dq}) {
      TensorArg& a = id == TensorId::q       ? p.q
                     : id == TensorId::o     ? p.o
                     : id == TensorId::stats ? p.stats
                     : id == TensorId::d_o   ? p.d_o
                                             : p.dq;
      a = ragged_arg_of(f, id);
    }
    p.rq = ragged_side(f, /*query=*/true);
  }
  if (f.ragged_kv) {
    p.k = ragged_arg_of(f, TensorId::k);
    p.v = ragged_arg_of(f, TensorId::v);
    p.dk = ragged_arg_of(f, TensorId::dk);
    p.dv = ragged_arg_of(f, TensorId::dv);
    p.rkv = ragged_side(f, /*query=*/false);
  }
  if (f.paged_kv) p.pages = paged_side(f);

  p.b = f.b;
  p.h_q = f.h_q;
  p.h_kv = f.h_kv;
  p.s_q = f.s_q;
  p.s_kv = f.s_kv;
  p.d_qk = f.d_qk;
  p.d_v = f.d_v;
  p.group = f.group;

  p.has_bias = f.has(TensorId::bias);
  if (p.has_bias) {
    p.bias_b = f.t(TensorId::bias).dims[0];
    p.bias_h = f.t(TensorId::bias).dims[1];
    // A broadcast dim is read at index 0 whatever (b, h) asks for.
    if (p.bias_b == 1) p.bias.s[0] = 0;
    if (p.bias_h == 1) p.bias.s[1] = 0;
  }
  p.scale = static_cast<float>(f.scale);
  p.scale_log2 = static_cast<float>(f.scale * kernels::kLog2eOf<double>);
  p.has_softcap = f.has_softcap;
  p.softcap = static_cast<float>(f.softcap);
  p.inv_softcap = f.has_softcap ? static_cast<float>(1.0 / f.softcap) : 0.f;
  p.has_sink = f.has(TensorId::sink);
  p.has_stats = f.has(TensorId::stats);
  p.has_dbias = f.has(TensorId::dbias);
  p.has_dsink = f.has(TensorId::dsink);
  p.band = kernels::BandMask::from(f.mask);

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
  p.q.ptr = args.get(TensorId::q);
  p.k.ptr = args.get(TensorId::k);
  p.v.ptr = args.get(TensorId::v);
  p.o.ptr = args.get(TensorId::o);
  p.stats.ptr = args.get(TensorId::stats);
  p.bias.ptr = args.get(TensorId::bias);
  p.sink.ptr = args.get(TensorId::sink);
  p.lens.q = static_cast<const int32_t*>(args.get(TensorId::seq_len_q));
  p.lens.kv = static_cast<const int32_t*>(args.get(TensorId::seq_len_kv));
  p.rq.offsets = args.get(TensorId::offsets_q);
  p.rq.seq_len = p.lens.q;
  p.rkv.offsets = args.get(TensorId::offsets_kv);
  p.rkv.seq_len = p.lens.kv;
  p.pages.table = static_cast<const int32_t*>(args.get(TensorId::block_table));
  if (!facts.backward()) return launch_forward(p, geometry_, stream);

  p.d_o.ptr = args.get(TensorId::d_o);
  p.dq.ptr = args.get(TensorId::dq);
  p.dk.ptr = args.get(TensorId::dk);
  p.dv.ptr = args.get(TensorId::dv);
  p.dbias.ptr = args.get(TensorId::dbias);
  p.dsink.ptr = args.get(TensorId::dsink);
  p.delta = ws.carve<float>(kDeltaChunk);
  if (p.delta == nullptr) {
    return Status(Code::internal, "generic: the plan has no workspace chunk 'delta'");
  }
  return launch_backward(p, geometry_, stream);
}

}  // namespace floe::detail::generic
