#include "engines/sm90/bwd_plan.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstdlib>

#include "engines/entry_launch.h"
#include "engines/sm90/bwd_kernels.h"
#include "engines/sm90/bwd_params.h"
#include "engines/sm90/bwd_tiles.h"
#include "engines/sm90/sm90_rules.h"
#include "engines/sm90/tma_descriptor.h"
#include "engines/tensor_core_rules.h"
#include "engines/workspace.h"
#include "kernels/constants.h"
#include "kernels/tile_scheduler.cuh"

namespace floe::detail::sm90 {
namespace {

struct BwdChoice {
  BwdTile tile = BwdTile::d128;
  bool softcap = false;  // the softcap main kernel
  bool dsink = false;    // a dSink step (a sink without dsink needs nothing: it is in the LSE)
  bool bias = false;     // the bias kernel (bwd_bias.cuh)
  const BwdKernel* kernel = nullptr;
};

// d128's two tiles through the library (H200, bf16, 16k tokens, session 12 at a9601e2, two rounds,
// ms, 80-row / 64-row query tiles): causal S 512 0.575 / 0.526, 1k 0.680 / 0.656, 2k 0.964 /
// 0.931, 4k 1.530 / 1.488, 8k 2.634 / 2.597, 16k 4.974 / 4.681; not causal S 512 0.675 / 0.641,
// 1k 0.916 / 0.904, 2k 1.445 / 1.424, 4k 2.543 / 2.507, 8k 5.089 / 5.096, 16k 9.889 / 10.001.
// 64 rows pad a causal head's short query ranges less (bwd_tiles.h); without a right bound they
// win up to 4k keys, where a visit's fixed cost weighs more than 80 rows' fewer visits.
constexpr int64_t kM64MaxKeysUnbounded = 4096;

// The deterministic mode keeps 80 rows without a right bound: its cost is a chain of turns per
// query tile, and 64 rows make a fifth more of them. H200, b4 h16 s4096 d128 bf16: deterministic
// on 80 rows 2.600 / 2.607 ms (c8d42a4, two rounds), on 64 rows 2.831 (eb60f54's official run,
// where the default on 64 rows took 2.422). Right-bounded bands were not measured: 64 rows there.
BwdTile d128_tile(const Facts& f) {
  const bool right_bound = f.mask.right.has_value() && !f.mask.left.has_value();
  if (right_bound) return BwdTile::d128_m64;
  return !f.deterministic && f.s_kv <= kM64MaxKeysUnbounded ? BwdTile::d128_m64 : BwdTile::d128;
}

// FLOE_SM90_BWD_TILE = d128 | d128m64 picks d128's tile at plan time (the A/B knob); unset, as
// measured (d128_tile). Any other value declines, naming it. *forced: the knob named the tile.
std::string choose_tile_override(BwdTile* tile, bool* forced) {
  const char* env = std::getenv("FLOE_SM90_BWD_TILE");
  const std::string value = env != nullptr ? env : "";
  *forced = !value.empty();
  if (value.empty()) return "";
  if (value != "d128" && value != "d128m64") {
    return "FLOE_SM90_BWD_TILE=" + value + ": must be d128 or d128m64";
  }
  if (*tile == BwdTile::d128 || *tile == BwdTile::d128_m64) {
    *tile = value == "d128" ? BwdTile::d128 : BwdTile::d128_m64;
  }
  return "";
}

// Whether dBias sums dS over the batch or the heads the bias broadcasts.
bool dbias_summed_over_batch(const Facts& f) {
  return f.has(TensorId::dbias) && f.t(TensorId::dbias).dims[0] == 1 && f.b > 1;
}
bool dbias_summed_over_heads(const Facts& f) {
  return f.has(TensorId::dbias) && f.t(TensorId::dbias).dims[1] == 1 && f.h_q > 1;
}
bool dbias_summed(const Facts& f) {
  return dbias_summed_over_batch(f) || dbias_summed_over_heads(f);
}

// The bias kernel's rules: no softcap beside it, a bias (and dBias) TMA can address, a
// deterministic dBias not summed over the heads of GQA, and a tile with room for the bias ring
// (d128 takes its 64-row tile for it).
std::string bias_rule(const Facts& f, BwdTile* tile, bool forced) {
  if (f.has_softcap) {
    return "tensor 'bias' with a softcap: sm90's bias backward has no softcap";
  }
  if (std::string why = check_tma_bias(f, TensorId::bias); !why.empty()) return why;
  // The sum's turns go head by head (bwd_dbias_order.cuh), and a CTA visits its group's heads one
  // after the other: each group would wait on the previous group's whole visit loop.
  if (f.deterministic && dbias_summed_over_heads(f) && f.group > 1) {
    return "tensor 'dbias' dims [" + std::to_string(f.t(TensorId::dbias).dims[0]) + ", " +
           std::to_string(f.t(TensorId::dbias).dims[1]) +
           ", ...] in deterministic mode with GQA (h_q / h_kv = " + std::to_string(f.group) +
           "): sm90's ordered sum over the heads would serialise each kv group behind the "
           "previous one (sm80 serves it)";
  }
  if (std::string why = check_tma_bias(f, TensorId::dbias); !why.empty()) return why;
  // A TMA store writes a row's last 16-byte piece whole, the elements past its end included
  // (the battery's canaries after a dBias of 11 keys, H200): rows of whole pieces only.
  if (f.has(TensorId::dbias) && f.s_kv % 8 != 0) {
    return "tensor 'dbias' dims[3] = " + std::to_string(f.s_kv) +
           ": sm90 stores dBias by TMA, which writes whole 16-byte pieces of a row: s_kv a "
           "multiple of 8";
  }
  if (*tile == BwdTile::d128 && !forced) *tile = BwdTile::d128_m64;
  if (!bwd_tile_shape(*tile).bias) {
    return std::string("tensor 'bias': backward tile ") + bwd_tile_shape(*tile).name +
           " has no room for a bias tile in shared memory" +
           (*tile == BwdTile::d128 ? " (d128m64 has)" : "");
  }
  return "";
}

std::string choose_backward(const Facts& f, const Target& target, BwdChoice* out) {
  if (std::string why = check_target(target); !why.empty()) return why;
  if (f.dtype != DType::f16 && f.dtype != DType::bf16) {
    return std::string("dtype ") + to_string(f.dtype) + ": sm90 serves f16 and bf16";
  }
  BwdChoice c;
  if (!bwd_tile_for(f.d_qk, f.d_v, &c.tile)) {
    return "head dims d_qk = " + std::to_string(f.d_qk) + ", d_v = " + std::to_string(f.d_v) +
           ": sm90's backward has tiles for d_qk = d_v = 64, 128 or 256 and for d_qk 192 / d_v "
           "128 only";
  }
  if (c.tile == BwdTile::d128) c.tile = d128_tile(f);
  bool forced = false;
  if (std::string why = choose_tile_override(&c.tile, &forced); !why.empty()) return why;
  c.bias = f.has(TensorId::bias);
  if (c.bias) {
    if (std::string why = bias_rule(f, &c.tile, forced); !why.empty()) return why;
  }
  // The ci kernel set has d128's 80-row tile only: there it serves what 64 rows would (but for a
  // bias, which has no room beside 80 rows).
  if (!forced && !c.bias && c.tile == BwdTile::d128_m64 &&
      find_bwd_kernel(BwdTile::d128_m64, f.dtype, f.has_softcap, f.has(TensorId::dsink)) ==
          nullptr) {
    c.tile = BwdTile::d128;
  }
  if (std::string why = check_scale_and_sizes(f); !why.empty()) return why;
  for (TensorId id : {TensorId::q, TensorId::k, TensorId::v, TensorId::d_o}) {
    if (std::string why = check_tma_operand(f, id); !why.empty()) return why;
  }
  for (TensorId id : {TensorId::o, TensorId::d_o, TensorId::dq, TensorId::dk, TensorId::dv}) {
    if (std::string why = check_row_tensor(f, id); !why.empty()) return why;
  }
  const BwdTileShape& shape = bwd_tile_shape(c.tile);
  const int64_t m_blocks = (f.s_q + shape.block_m - 1) / shape.block_m;
  const int64_t n_blocks = (f.s_kv + shape.block_n - 1) / shape.block_n;
  const int64_t dbias_tiles = dbias_summed(f) ? m_blocks * n_blocks * f.t(TensorId::dbias).dims[0] *
                                                    f.t(TensorId::dbias).dims[1]
                                              : 0;
  if (m_blocks * f.h_q * f.b > kInt32Max || n_blocks * f.h_kv * f.b > kInt32Max ||
      dbias_tiles > kInt32Max) {
    return "grid: the query, key or dBias tiles exceed sm90's 2^31 - 1 CTAs";
  }
  c.softcap = f.has_softcap;
  c.dsink = f.has(TensorId::dsink);
  c.kernel = find_bwd_kernel(c.tile, f.dtype, c.softcap, c.dsink, c.bias);
  if (c.kernel == nullptr) {
    return std::string("kernel not built in the ci kernel set (backward tile ") + shape.name +
           ", " + to_string(f.dtype) + ")";
  }
  if (static_cast<size_t>(c.kernel->smem_bytes) > target.smem_per_block_optin) {
    return std::string("backward tile ") + shape.name + " needs " +
           std::to_string(c.kernel->smem_bytes / 1024) +
           " KB of shared memory per block; the device allows " +
           std::to_string(target.smem_per_block_optin / 1024) + " KB";
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
// The deterministic grid's share of L2 (the H100's and H200's hold 50 and 60 MB) for the Q and dO
// of the pairs whose key tiles run together.
constexpr int64_t kSectionL2Bytes = int64_t{24} << 20;

BwdParams make_params(const Facts& f, const BwdChoice& c) {
  BwdParams p;
  p.o_strides = tensor_core::strides_of(f, TensorId::o);
  p.do_strides = tensor_core::strides_of(f, TensorId::d_o);
  p.dq_strides = tensor_core::strides_of(f, TensorId::dq);
  p.dk_strides = tensor_core::strides_of(f, TensorId::dk);
  p.dv_strides = tensor_core::strides_of(f, TensorId::dv);
  p.stats_strides = tensor_core::strides_of(f, TensorId::stats);
  fill_sizes(f, p);
  p.d = static_cast<int32_t>(f.d_qk);
  p.d_v = static_cast<int32_t>(f.d_v);
  p.scale = static_cast<float>(f.scale);
  p.score.scale_log2 = static_cast<float>(f.scale * kernels::kLog2eOf<double>);
  p.score.has_softcap = f.has_softcap;
  if (f.has_softcap) {  // as the forward's (fwd_plan.cc), which wrote the stats
    p.score.cap_log2 = static_cast<float>(f.softcap * kernels::kLog2eOf<double>);
    p.score.tanh_k = static_cast<float>(2.0 * kernels::kLog2eOf<double> * f.scale / f.softcap);
  }
  p.bias_unit = static_cast<float>(1.0 / f.scale);
  // One writer a dBias tile: stored by TMA from dS's tile; summed: reductions, then a last step.
  p.has_dbias = f.has(TensorId::dbias) && !dbias_summed(f);
  if (f.has(TensorId::dbias)) p.dbias_strides = tensor_core::strides_of(f, TensorId::dbias);
  if (f.has(TensorId::sink)) p.sink_stride = f.t(TensorId::sink).strides[0];
  if (f.has(TensorId::dsink)) p.dsink_stride = f.t(TensorId::dsink).strides[0];
  p.score.mask = kernels::BandMask::from(f.mask);
  if (f.has(TensorId::seq_len_q)) p.lens.q_stride = f.t(TensorId::seq_len_q).strides[0];
  if (f.has(TensorId::seq_len_kv)) p.lens.kv_stride = f.t(TensorId::seq_len_kv).strides[0];
  p.score.has_mask = f.mask.is_band();
  const BwdTileShape& shape = bwd_tile_shape(c.tile);
  p.num_m_blocks = static_cast<int32_t>((f.s_q + shape.block_m - 1) / shape.block_m);
  p.num_n_blocks = static_cast<int32_t>((f.s_kv + shape.block_n - 1) / shape.block_n);
  p.s_q_pad = p.num_m_blocks * shape.block_m;
  p.dbias_tile_floats = shape.block_m * shape.block_n;
  if (dbias_summed(f)) {
    const TensorDesc& d = f.t(TensorId::dbias);
    p.dbias_b = static_cast<int32_t>(d.dims[0]);
    p.dbias_h = static_cast<int32_t>(d.dims[1]);
  }
  p.query_tiles = kernels::QueryTileScheduler::make(p.num_m_blocks, f.h_q, /*heavy_last_m=*/false);
  p.deterministic = f.deterministic;
  // Deterministic: sections of (kv head, batch) pairs whose Q and dO (every query head of the
  // group) fit in kSectionL2Bytes together, so that a wave of CTAs holds the highest key tiles of
  // several pairs rather than all key tiles of one (whose chain of turns would idle the wave).
  int64_t section = 1;
  if (f.deterministic) {
    const int64_t pair_bytes = f.group * f.s_q * (f.d_qk + f.d_v) * 2;
    section = std::max<int64_t>(1, kSectionL2Bytes / std::max<int64_t>(1, pair_bytes));
  }
  kernels::KeyOrder order =
      f.deterministic ? kernels::KeyOrder::kDescending : kernels::KeyOrder::kTileFastest;
  // A summed dBias: the pairs that add into one accumulator tile side by side in the grid, so that
  // their reductions meet in L2 rather than in HBM once a pair (H200, b4 h16 s4096 d128, bias
  // [1, 16]: 5.323 ms in the plain order, 3.845 in this one). Summed over the heads (and perhaps
  // the batch): a section is one batch's kv heads; over the batch alone: one head's batches.
  // Deterministic: the same sections, key tiles highest first, so that the pairs before in the
  // sum (bwd_dbias_order.cuh) and the higher key tiles (bwd_dq_order.cuh) go out first.
  bool batch_fastest = false;
  if (dbias_summed(f)) {
    if (!f.deterministic) order = kernels::KeyOrder::kSiblings;
    batch_fastest = !dbias_summed_over_heads(f);
    section = batch_fastest ? f.b : f.h_kv;
  }
  p.key_tiles =
      kernels::KeyTileScheduler::make(p.num_n_blocks, f.h_kv, order, f.b, section, batch_fastest);
  return p;
}

// Every temporary is a named chunk: the fp32 dQ accumulator, the dense LSE (log2 units) and
// Delta, rows padded to whole query tiles, in deterministic mode one semaphore per query tile;
// a summed dBias's fp32 tiles, in deterministic mode one semaphore per tile.
void add_workspace(const Facts& f, const BwdParams& p, WorkspaceLayout& ws) {
  const size_t rows = static_cast<size_t>(f.b * f.h_q) * static_cast<size_t>(p.s_q_pad);
  ws.add(kDqAccumChunk, rows * static_cast<size_t>(p.d) * sizeof(float));
  ws.add(kLseChunk, rows * sizeof(float));
  ws.add(kDeltaChunk, rows * sizeof(float));
  if (f.deterministic) {
    ws.add(kDqSemaphoreChunk, static_cast<size_t>(f.b * f.h_q) *
                                  static_cast<size_t>(p.num_m_blocks) * sizeof(int32_t));
  }
  if (p.dbias_b > 0) {
    const size_t tiles = static_cast<size_t>(p.dbias_b * p.dbias_h) *
                         static_cast<size_t>(p.num_m_blocks) * static_cast<size_t>(p.num_n_blocks);
    ws.add(kDbiasAccumChunk, tiles * static_cast<size_t>(p.dbias_tile_floats) * sizeof(float));
    if (f.deterministic) ws.add(kDbiasSemaphoreChunk, tiles * sizeof(int32_t));
  }
}

// With a bias: its tensor map (and dBias's) without the bases, and the broadcast dims' steps.
void bias_maps(const Facts& f, BwdTile tile, BwdParams& p, TmaMatrix* bias, TmaMatrix* dbias) {
  if (!f.has(TensorId::bias)) return;
  const int rows = bwd_tile_shape(tile).block_m;
  *bias = tma_bias(f, rows, &p.bias_b_step, &p.bias_h_step, TensorId::bias);
  if (f.has(TensorId::dbias)) {
    *dbias = tma_bias(f, rows, &p.dbias_b_step, &p.dbias_h_step, TensorId::dbias);
  }
}

class Sm90BackwardPlan final : public tensor_core::TensorCoreLaunchPlan {
 public:
  Sm90BackwardPlan(const Facts& f, const BwdParams& params, const BwdKernel* kernel, BwdTile tile,
                   const BwdGrids& grids, const StepFunctions& functions)
      : params_(params),
        q_(tma_tensor(f, TensorId::q, bwd_tile_shape(tile).block_m)),
        do_(tma_tensor(f, TensorId::d_o, bwd_tile_shape(tile).block_m)),
        k_(tma_tensor(f, TensorId::k, bwd_tile_shape(tile).block_n)),
        v_(tma_tensor(f, TensorId::v, bwd_tile_shape(tile).block_n)),
        kernel_(kernel),
        tile_(tile),
        grids_(grids),
        functions_(functions),
        has_dsink_(f.has(TensorId::dsink)) {
    bias_maps(f, tile, params_, &bias_, &dbias_);
  }

  // TMA reads the bias and writes dBias: their bases, like Q's, need 16 bytes.
  size_t pointer_alignment(TensorId id, const Facts& facts) const override {
    if (id == TensorId::bias || id == TensorId::dbias) return 16;
    return TensorCoreLaunchPlan::pointer_alignment(id, facts);
  }

  // Encodes the four tensor maps (host only: no allocation, no sync), then launches.
  Status launch(const Facts& facts, const Arguments& args, const Workspace& ws,
                Stream stream) const override {
    BwdParams p = params_;
    TmaTensor q = q_, d_o = do_, k = k_, v = v_;
    q.base = args.get(TensorId::q);
    d_o.base = args.get(TensorId::d_o);
    k.base = args.get(TensorId::k);
    v.base = args.get(TensorId::v);
    if (!encode_tma(q, &p.tma_q) || !encode_tma(d_o, &p.tma_do) || !encode_tma(k, &p.tma_k) ||
        !encode_tma(v, &p.tma_v)) {
      return Status(Code::device_error, std::string("sm90: encoding the TMA descriptors of ") +
                                            kernel_->name + " failed (cuTensorMapEncodeTiled)");
    }
    if (facts.has(TensorId::bias)) {
      TmaMatrix bias = bias_, dbias = dbias_;
      bias.base = args.get(TensorId::bias);
      // dBias's map only where the kernel stores to it (a summed dBias goes out by its last step).
      dbias.base = params_.has_dbias ? args.get(TensorId::dbias) : nullptr;
      if (!encode_tma(bias, &p.tma_bias) ||
          (dbias.base != nullptr && !encode_tma(dbias, &p.tma_dbias))) {
        return Status(Code::device_error,
                      std::string("sm90: encoding the bias's TMA descriptors of ") + kernel_->name +
                          " failed (cuTensorMapEncodeTiled)");
      }
    }
    p.o = args.get(TensorId::o);
    p.d_o = args.get(TensorId::d_o);
    p.stats = static_cast<const float*>(args.get(TensorId::stats));
    if (facts.has(TensorId::seq_len_q))
      p.lens.q = static_cast<const int32_t*>(args.get(TensorId::seq_len_q));
    if (facts.has(TensorId::seq_len_kv))
      p.lens.kv = static_cast<const int32_t*>(args.get(TensorId::seq_len_kv));
    p.dq = args.get(TensorId::dq);
    p.dk = args.get(TensorId::dk);
    p.dv = args.get(TensorId::dv);
    p.dq_accum = ws.carve<float>(kDqAccumChunk);
    p.lse_log2 = ws.carve<float>(kLseChunk);
    p.delta = ws.carve<float>(kDeltaChunk);
    if (p.deterministic) p.dq_sem = ws.carve<int32_t>(kDqSemaphoreChunk);
    if (p.dbias_b > 0) {
      p.dbias_accum = ws.carve<float>(kDbiasAccumChunk);
      p.dbias = args.get(TensorId::dbias);
      if (p.deterministic) p.dbias_sem = ws.carve<int32_t>(kDbiasSemaphoreChunk);
    }
    if (facts.has(TensorId::dsink)) {
      p.sink = static_cast<const float*>(args.get(TensorId::sink));
      p.dsink = static_cast<float*>(args.get(TensorId::dsink));
    }
    // The preprocess and the dQ conversion cover query tiles, the main kernel key tiles, dSink
    // (step 3) the query heads, the bias kernel's last step the summed dBias's tiles (0: not
    // summed, skipped).
    const int dsink_step = has_dsink_ ? 3 : -1;
    const int dbias_step = bias_.rows != 0 ? kernel_->steps.count - 1 : -1;
    return launch_steps(
        "sm90", *kernel_, functions_, grids_,
        [&](int i) {
          return i == 1            ? grids_.key_tiles
                 : i == dsink_step ? grids_.heads
                 : i == dbias_step ? grids_.dbias_tiles
                                   : grids_.query_tiles;
        },
        p, stream);
  }

  std::string describe() const override {
    const BwdTileShape& s = bwd_tile_shape(tile_);
    return std::string(kernel_->name) + ": tile " + s.name + ", " + std::to_string(s.block_n) +
           " keys per CTA x " + std::to_string(s.block_m) + "-query visits, " +
           std::to_string(s.stages) + " Q/dO stages, " + std::to_string(grids_.key_tiles) +
           " CTAs" +
           (s.wide ? "; both consumer warpgroups on the keys, d split between them (P^T and dS^T "
                     "through shared memory, dQ added from registers)"
                   : "") +
           score_mods() +
           (params_.deterministic
                ? "; deterministic: each query tile's dQ added by its key tiles in a fixed order "
                  "(highest first, the grid launching them highest first, " +
                      std::to_string(params_.key_tiles.section.d) +
                      " (kv head, batch) pairs a section), one semaphore per query tile"
                : "");
  }

 private:
  // The softcap and bias kernels and the dSink step, for describe().
  std::string score_mods() const {
    const bool dsink = has_dsink_;
    const bool bias = bias_.rows != 0;
    if (!params_.score.has_softcap && !dsink && !bias) return "";
    std::string mods;
    if (params_.score.has_softcap) mods = "softcap (S recomputed through it, dS times d tanh)";
    if (bias) {
      mods = std::string(
                 "bias (a tile a visit staged by TMA beside Q, read transposed by "
                 "ldmatrix") +
             (params_.has_dbias ? "; dBias = dS, its shared-memory tile stored by TMA)"
              : params_.dbias_b > 0
                  ? std::string("; dBias summed over the broadcast dims: dS added into an fp32 "
                                "chunk by vector reductions, ") +
                        (params_.deterministic
                             ? "the pairs of the sum in its order at each tile (one semaphore a "
                               "tile)"
                             : "in no fixed order") +
                        ", converted by a last kernel; the " +
                        std::to_string(params_.key_tiles.section.d) + " " +
                        (params_.key_tiles.batch_fastest ? "batches" : "kv heads") +
                        " summed into a tile side by side in the grid)"
                  : ")");
    }
    if (dsink) {
      mods += std::string(mods.empty() ? "" : ", ") +
              "dSink (a fourth kernel, one CTA per query head, over the LSE and Delta chunks)";
    }
    return "; score mods: " + mods;
  }

  BwdParams params_;
  TmaTensor q_, do_, k_, v_;
  TmaMatrix bias_, dbias_;  // with a bias: its tensor maps (and dBias's), without the bases
  const BwdKernel* kernel_;
  BwdTile tile_;
  BwdGrids grids_;
  StepFunctions functions_;  // resolved at plan time (null without a device)
  bool has_dsink_;
};

}  // namespace

std::string backward_decline_reason(const Facts& facts, const Target& target) {
  return choose_backward(facts, target, nullptr);
}

Result<BwdParams> backward_params(const Facts& facts, const Target& target) {
  BwdChoice c;
  if (std::string why = choose_backward(facts, target, &c); !why.empty()) {
    return Status(Code::not_supported, "sm90: " + why);
  }
  BwdParams p = make_params(facts, c);
  TmaMatrix bias, dbias;
  bias_maps(facts, c.tile, p, &bias, &dbias);
  // Set where launch() would set them, to a pointer never dereferenced on the host.
  static int32_t nowhere = 0;
  if (p.deterministic) p.dq_sem = &nowhere;
  if (p.deterministic && p.dbias_b > 0) p.dbias_sem = &nowhere;
  return p;
}

Result<std::unique_ptr<const LaunchPlan>> plan_backward(const Facts& facts, const Target& target,
                                                        WorkspaceLayout& workspace) {
  const Result<BwdChoice> c = tensor_core::accepted_choice<BwdChoice>(
      "sm90", [&](BwdChoice* out) { return choose_backward(facts, target, out); });
  if (!c) return c.status();
  const BwdParams params = make_params(facts, *c);
  add_workspace(facts, params, workspace);
  BwdGrids grids;
  grids.query_tiles =
      static_cast<unsigned>(kernels::QueryTileScheduler::grid(params.query_tiles, facts.b));
  grids.key_tiles =
      static_cast<unsigned>(kernels::KeyTileScheduler::grid(params.key_tiles, facts.b));
  grids.heads = static_cast<unsigned>(facts.h_q);
  grids.dbias_tiles = static_cast<unsigned>(int64_t{params.dbias_b} * params.dbias_h *
                                            params.num_m_blocks * params.num_n_blocks);
  StepFunctions functions;
  if (Status st = resolve_steps("sm90", c->kernel->name, c->kernel->steps, target, &functions);
      !st) {
    return st;
  }
  return tensor_core::prepared_plan<Sm90BackwardPlan>("sm90", *c->kernel, target, facts, params,
                                                      c->kernel, c->tile, grids, functions);
}

}  // namespace floe::detail::sm90
