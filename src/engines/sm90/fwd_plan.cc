#include "engines/sm90/fwd_plan.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "engines/entry_launch.h"
#include "engines/serving_sides.h"
#include "engines/sm90/fwd_kernels.h"
#include "engines/sm90/fwd_params.h"
#include "engines/sm90/fwd_tiles.h"
#include "engines/sm90/sm90_rules.h"
#include "engines/sm90/tma_descriptor.h"
#include "engines/tensor_core_rules.h"
#include "kernels/constants.h"

namespace floe::detail::sm90 {
namespace {

// How the CTAs take the query tiles (fwd_kernel.cuh, kernels/tile_scheduler.cuh): one CTA per
// tile (the hardware hands them out as SMs free up), or one CTA per SM walking a static list
// (persistent: one prologue per CTA, the next tile's loads under the previous epilogue), the
// list in QueryTileScheduler's order or longest first (lpt).
enum class FwdSchedule { grid, persistent, lpt, lpt_snake, lpt_l2 };

// A list walked with as many CTAs as tiles is a CTA per tile in the list's order (one pass: no
// snake).
std::string to_string(FwdSchedule s, bool cta_per_tile) {
  if (cta_per_tile) {
    switch (s) {
      case FwdSchedule::lpt:
      case FwdSchedule::lpt_snake:
        return "a CTA per query tile, longest first";
      case FwdSchedule::lpt_l2:
        return "a CTA per query tile, longest first in L2 sections";
      default:
        break;
    }
  }
  switch (s) {
    case FwdSchedule::grid:
      return "a CTA per query tile";
    case FwdSchedule::persistent:
      return "persistent";
    case FwdSchedule::lpt:
      return "persistent, longest first";
    case FwdSchedule::lpt_snake:
      return "persistent, longest first, snake";
    case FwdSchedule::lpt_l2:
      return "persistent, longest first in L2 sections, snake";
  }
  return "";
}

// Later query tiles see more keys: a band bounded on the right only (causal and the like).
bool heavy_last_m(const Facts& f) {
  return f.mask.right.has_value() && !f.mask.left.has_value();
}

struct FwdChoice {
  FwdTile tile = FwdTile::d128;
  bool score_mod = false;  // softcap or bias (and a sink beside them): the score-mod kernel
  bool sink = false;       // a sink alone: the plain kernel's sink sibling
  bool pingpong = false;   // the plain kernel with pingpong (short key sequences)
  bool serving = false;    // a ragged side: the serving kernel (fwd_launch.cuh's ServingTraits)
  const FwdKernel* kernel = nullptr;
  FwdSchedule schedule = FwdSchedule::grid;
  int ctas = 0;                // persistent: the grid (the SM count); 0: a CTA per tile
  bool fixed_max = false;      // the score-mod kernel's rows take a fixed max (softcap, bf16)
  bool paged_batched = false;  // a paged tile's pages read together (FwdParams::paged_batched)
};

// FLOE_SM90_FWD_SCHEDULE = grid | persistent[:N] | lpt[:N] | lpts[:N] (lpt, snake) | lptl2[:N]
// (lpts in L2 sections) overrides the choice, read at plan time: the A/B knob the default was
// measured with, and (with a small N, the CTA count; unset, the SM count; N >= the tiles, a CTA
// per tile) a way to make the tests walk many tiles per CTA on small problems.
//
// Measured on the H200 (the sweep, bf16, 16k tokens; docs in README.md): persistent beats a CTA
// per tile wherever the tiles weigh the same (d64 +5..15%, d128 +0..8%, d256 +0..3%, the short
// sequences most). With heavy tiles (causal), longest first with snake wins at d64 (+3..27%); at
// d128 and d256 their K and V streams need L2 reuse between the CTAs of a head, which a list with
// all heads in each pass spreads over every head. Longest first in L2 sections (a section's K and
// V fit in 32 MB) keeps that reuse: session 12 (a9601e2, two rounds, ms, the previous choice /
// a CTA per tile in that order / persistent in that order): d128 S 512 0.135 / 0.157 / 0.131,
// 1k 0.199 / 0.201 / 0.195, 2k 0.299 / 0.289 / 0.318, 4k 0.492 / 0.475 / 0.565, 8k 0.880 /
// 0.859 / 1.044, 16k 1.594 / 1.597 / 1.994; d256 S 512 0.131 / 0.130 / 0.133, 1k 0.171 / 0.167
// / 0.205, 2k 0.264 / 0.247 / 0.343, 4k 0.446 / 0.413 / 0.609, 8k 0.798 / 0.745 / 1.132, 16k
// 1.403 / 1.410 / 2.180. Short d128 keys walk the list on one CTA an SM (a head's K and V, 256
// KB at S 512, fit in L2 in any order), longer ones and d256 take a CTA per tile in the list's
// order. d64 kept lpts (the L2 list persistent: -1..-2% at 1k-4k, +2% at 8k-16k, within two
// rounds' spread); d192x128 keeps a CTA per tile (not measured).
// A value the knob does not know makes sm90 decline, naming it: a typo must not measure the
// default schedule while claiming another.
constexpr int64_t kL2PersistentMaxKeys = 1024;

std::string choose_schedule(const Facts& f, const Target& target, FwdChoice* c) {
  const bool heavy = heavy_last_m(f);
  const bool l2 = heavy && (c->tile == FwdTile::d128 || c->tile == FwdTile::d256);
  const bool l2_persistent = l2 && c->tile == FwdTile::d128 && f.s_kv <= kL2PersistentMaxKeys;
  c->schedule = !heavy                    ? FwdSchedule::persistent
                : l2                      ? FwdSchedule::lpt_l2
                : c->tile == FwdTile::d64 ? FwdSchedule::lpt_snake
                                          : FwdSchedule::grid;
  c->ctas = target.sm_count > 0 ? target.sm_count : 1;
  if (l2 && !l2_persistent) c->ctas = 0;  // a CTA per tile, in the list's order
  if (const char* env = std::getenv("FLOE_SM90_FWD_SCHEDULE"); env != nullptr && *env != '\0') {
    const std::string value(env);
    const size_t colon = value.find(':');
    const std::string name = value.substr(0, colon);
    static const struct {
      const char* name;
      FwdSchedule schedule;
    } kNames[] = {{"grid", FwdSchedule::grid},
                  {"persistent", FwdSchedule::persistent},
                  {"lpt", FwdSchedule::lpt},
                  {"lpts", FwdSchedule::lpt_snake},
                  {"lptl2", FwdSchedule::lpt_l2}};
    bool known = false;
    for (const auto& n : kNames) {
      if (name == n.name) {
        c->schedule = n.schedule;
        known = true;
      }
    }
    const int ctas = colon == std::string::npos ? 0 : std::atoi(value.c_str() + colon + 1);
    if (!known || (colon != std::string::npos && ctas <= 0)) {
      return "FLOE_SM90_FWD_SCHEDULE=" + value +
             ": must be grid, persistent, lpt, lpts or lptl2, optionally :N with N > 0 CTAs";
    }
    c->ctas = ctas > 0 ? ctas : target.sm_count > 0 ? target.sm_count : 1;
  }
  if (c->schedule == FwdSchedule::grid) c->ctas = 0;
  return "";
}

// The plain kernel with pingpong between its two consumer warpgroups (fwd_kernels.h) up to this
// many keys. A short sequence gives a query tile few key tiles, so what a warpgroup does once a
// tile (its first softmax, alone; its last P V; its epilogue) is a large share of the tile: with
// pingpong the other warpgroup's products run under it. H200, d128, TFLOP/s without / with
// (session 9, one call): S 512 423 / 462, 1k 516 / 569, 2k 594 / 635, 4k 650 / 667. At 16k
// pingpong measured 1% slower in session 6 (700 against 709, fwd_tiles.h) and within the noise
// of that point's two modes in session 9, so long sequences keep the plain kernel.
constexpr int64_t kPingpongMaxKeys = 4096;

// FLOE_SM90_FWD_PINGPONG = 0 | 1 overrides the choice at plan time (the A/B knob); any other value
// makes sm90 decline, naming it.
std::string choose_pingpong(const Facts& f, FwdChoice* c) {
  // d128 only: the tile it was measured on (fwd_launch.cuh builds no pingpong kernel elsewhere).
  const bool can = !c->score_mod && !c->sink && c->tile == FwdTile::d128;
  c->pingpong = can && f.s_kv <= kPingpongMaxKeys;
  int knob = -1;
  if (std::string why = read_switch("FLOE_SM90_FWD_PINGPONG", &knob); !why.empty()) return why;
  if (knob >= 0) c->pingpong = can && knob == 1;
  return "";
}

// The score-mod kernel's fixed-max rows (fwd_params.h): with a softcap every score is at most
// the cap (h' <= 0), so every row may take M = -K as its max, P = 2^(h' + K), and skip the
// running max and O's rescaling. Where it may: P stays in [2^(K - 2 cap_log2), 2^K];
// K = max(0, 2 cap_log2 - 80) keeps every row's largest P at 2^-80 or more (a P the exp2 flushes
// to 0, under 2^-126, is then under 2^-46 of it: as negligible as with a running max), and
// K <= 68 bounds P by 2^68 (O accumulates at most 2^68 Skv max|V| in fp32, where a running max
// has Skv max|V|): cap_log2 <= 74, softcap <= 51.29. bf16 only (P is rounded to the input dtype
// for P V, and f16's range would flush it) and no bias (the scores are then unbounded).
// H200, d128, S 4096, B 4, Hq 16, bf16, softcap 30, one call at 304d783: 1.190 / 1.188 ms
// against 1.292 / 1.284 with the running max (plain 0.816 / 0.817); causal 0.698 against 0.746.
constexpr double kFixedMaxFloor = 80.0, kFixedMaxCeiling = 68.0;

double fixed_max_shift(const Facts& f) {
  return std::max(0.0, 2.0 * f.softcap * kernels::kLog2eOf<double> - kFixedMaxFloor);
}

// FLOE_SM90_SOFTCAP_FIXED_MAX = 0 | 1 overrides the choice at plan time (the A/B knob: 1 where
// it may serve); any other value makes sm90 decline, naming it.
std::string choose_fixed_max(const Facts& f, FwdChoice* c) {
  const bool can = f.has_softcap && f.dtype == DType::bf16 && !f.has(TensorId::bias) &&
                   fixed_max_shift(f) <= kFixedMaxCeiling;
  c->fixed_max = can;
  int knob = -1;
  if (std::string why = read_switch("FLOE_SM90_SOFTCAP_FIXED_MAX", &knob); !why.empty()) {
    return why;
  }
  if (knob >= 0) c->fixed_max = can && knob == 1;
  return "";
}

// A paged cache's key tile is loaded in boxes of min(P, block_n) rows, each within one page:
// P a multiple of the tile's keys or a divisor of them, and a multiple of 8 rows (the 128-byte
// swizzle's period, so that every box lands in phase in the tile).
std::string check_page_size(const Facts& f, int block_n) {
  const int64_t page = f.page_size;
  if (page % 8 == 0 && (page % block_n == 0 || block_n % page == 0)) return "";
  return "paged_kv: page size " + std::to_string(page) +
         ": sm90's paged loads need a multiple of 8 rows that divides the tile's " +
         std::to_string(block_n) + " keys or is a multiple of them";
}

int paged_box_rows(const Facts& f, int block_n) {
  return static_cast<int>(std::min<int64_t>(f.page_size, block_n));
}

// A paged key tile's pages read from the block table together and shared by K and V
// (fwd_mainloop.cuh's PagedBoxes), where pages are smaller than the tile and it has at most
// kPagedBatchMaxBoxes boxes. The per-box reads it replaces wait out one table read before each box:
// pages of 16 at d128 (b8 h32/8 q1024 kv8192 causal, H200, session 14, cdd03a4) 2.744 ms against
// 3.497, pages of 64 1.592 against 1.621.
bool paged_batched(const Facts& f, int block_n) {
  const int box_rows = paged_box_rows(f, block_n);
  return box_rows < block_n && box_rows * kPagedBatchMaxBoxes >= block_n;
}

// Ragged sides (DESIGN 2.1) and a paged K/V cache (2.2) take the serving kernel: Q, K, V loaded
// by TMA from the packed tensors at each slot's first token (K and V from the pages the block
// table names), O and the stats written to the slot. What it does not serve yet, by name (sm80
// serves those): score mods.
std::string check_serving(const Facts& f) {
  if (f.has_softcap || f.has(TensorId::bias) || f.has(TensorId::sink)) {
    return std::string(f.has_softcap           ? "softcap"
                       : f.has(TensorId::bias) ? "tensor 'bias'"
                                               : "tensor 'sink'") +
           (f.ragged_q || f.ragged_kv ? " with a ragged side" : " with a paged K/V cache") +
           ": sm90's serving kernel has no score mods yet";
  }
  // TMA coordinates are int32: a tile's row is its slot's first token plus up to the envelope.
  for (const bool query : {true, false}) {
    if (!(query ? f.ragged_q : f.ragged_kv)) continue;
    const int64_t total = query ? f.total_q : f.total_kv;
    const int64_t envelope = query ? f.s_q : f.s_kv;
    const char* name = query ? "ragged_q" : "ragged_kv";
    if (total <= 0) return std::string(name) + ": an empty packed tensor (total 0)";
    if (total + envelope > kInt32Max) {
      return std::string(name) + ": total " + std::to_string(total) + " + envelope " +
             std::to_string(envelope) + " tokens exceed sm90's 32-bit TMA coordinates";
    }
  }
  return "";
}

std::string choose_forward(const Facts& f, const Target& target, FwdChoice* out) {
  // The layout first, whatever the target (explain names the option on every part).
  if (f.serving()) {
    if (std::string why = check_serving(f); !why.empty()) return why;
  }
  if (std::string why = check_target(target); !why.empty()) return why;
  if (f.backward()) return "backward: sm90 serves the forward only";
  if (f.dtype != DType::f16 && f.dtype != DType::bf16) {
    return std::string("dtype ") + to_string(f.dtype) + ": sm90 serves f16 and bf16";
  }
  FwdChoice c;
  if (!fwd_tile_for(f.d_qk, f.d_v, &c.tile)) {
    return "head dims d_qk = " + std::to_string(f.d_qk) + ", d_v = " + std::to_string(f.d_v) +
           ": sm90 has tiles for d_qk = d_v = 64, 128 or 256, and d_qk = 192 with d_v = 128, only";
  }
  if (std::string why = check_scale_and_sizes(f); !why.empty()) return why;
  if (std::string why = check_tma_bias(f); !why.empty()) return why;
  for (TensorId id : {TensorId::q, TensorId::k, TensorId::v}) {
    if (std::string why = check_tma_operand(f, id); !why.empty()) return why;
  }
  if (std::string why = check_row_tensor(f, TensorId::o); !why.empty()) return why;
  const FwdTileShape& shape = fwd_tile_shape(c.tile);
  const int64_t m_blocks = (f.s_q + shape.block_m - 1) / shape.block_m;
  if (m_blocks * f.h_q * f.b > kInt32Max) {
    return "grid: " + std::to_string(m_blocks * f.h_q * f.b) +
           " query tiles exceed sm90's 2^31 - 1 CTAs";
  }
  // The plain kernel keeps the scale folded into the exponent and knows no score mod; its sink
  // sibling folds a sink in at the end; a negative scale is declined above.
  c.score_mod = f.has_softcap || f.has(TensorId::bias);
  c.sink = !c.score_mod && f.has(TensorId::sink);
  c.serving = f.serving();
  if (f.paged_kv) {
    if (std::string why = check_page_size(f, shape.block_n); !why.empty()) return why;
    c.paged_batched = paged_batched(f, shape.block_n);
  }
  if (c.serving) {
    // One serving kernel a tile: d128's pingpong sibling, the plain kernel elsewhere.
    c.pingpong = c.tile == FwdTile::d128;
    c.kernel = find_fwd_serving_kernel(c.tile, f.dtype);
  } else {
    if (std::string why = choose_pingpong(f, &c); !why.empty()) return why;
    if (std::string why = choose_fixed_max(f, &c); !why.empty()) return why;
    c.kernel = find_fwd_kernel(c.tile, f.dtype, c.score_mod, c.sink, c.pingpong);
  }
  if (c.kernel == nullptr) {
    return std::string("kernel not built in the ci kernel set (tile ") + shape.name + ", " +
           to_string(f.dtype) +
           (c.serving     ? ", serving)"
            : c.score_mod ? ", score-mod)"
            : c.sink      ? ", sink)"
            : c.pingpong  ? ", pingpong)"
                          : ")");
  }
  if (static_cast<size_t>(c.kernel->smem_bytes) > target.smem_per_block_optin) {
    return std::string("tile ") + shape.name + " needs " +
           std::to_string(c.kernel->smem_bytes / 1024) +
           " KB of shared memory per block; the device allows " +
           std::to_string(target.smem_per_block_optin / 1024) + " KB";
  }
  if (std::string why = choose_schedule(f, target, &c); !why.empty()) return why;
  if (out != nullptr) *out = c;
  return "";
}

// lpt_l2: (head, batch) pairs per section, so that a section's K and V fit in 32 MB of L2
// (FlashAttention 3's figure for the H100's 50 MB): the CTAs in flight then read one section's K
// and V, as a CTA per tile reads one head's. The q heads of one kv head share its K and V.
int64_t l2_section_pairs(const Facts& f) {
  const int64_t kv_bytes = f.s_kv * (f.d_qk + f.d_v) * 2;  // f16 / bf16, one kv head
  const int64_t per_pair = std::max<int64_t>(1, kv_bytes / std::max<int64_t>(1, f.group));
  return std::max<int64_t>(1, (int64_t{32} << 20) / per_pair);
}

// O's and the stats' [b, h, s] strides; a ragged query side's [T, h, .] as {0, h, token}.
kernels::Strides3 row_strides_of(const Facts& f, TensorId id) {
  if (!f.has(id) || !f.ragged_q) return tensor_core::strides_of(f, id);
  const TensorDesc& d = f.t(id);
  return kernels::Strides3{0, d.strides[1], d.strides[0]};
}

FwdParams make_params(const Facts& f, const FwdChoice& c) {
  FwdParams p;
  p.o_strides = row_strides_of(f, TensorId::o);
  p.stats_strides = row_strides_of(f, TensorId::stats);
  if (c.serving) {
    const int block_n = fwd_tile_shape(c.tile).block_n;
    p.serve = make_serving_rows(f, block_n);
    if (f.paged_kv) p.paged_box_rows = paged_box_rows(f, block_n);
    p.paged_batched = c.paged_batched ? 1 : 0;
  }
  if (f.has(TensorId::seq_len_q)) p.lens.q_stride = f.t(TensorId::seq_len_q).strides[0];
  if (f.has(TensorId::seq_len_kv)) p.lens.kv_stride = f.t(TensorId::seq_len_kv).strides[0];
  p.s_q = static_cast<int32_t>(f.s_q);
  p.s_kv = static_cast<int32_t>(f.s_kv);
  constexpr double kLog2eD = kernels::kLog2eOf<double>;
  p.score.scale_log2 = static_cast<float>(f.scale * kLog2eD);
  p.score.has_softcap = f.has_softcap;
  if (f.has_softcap) {
    p.score.cap_log2 = static_cast<float>(f.softcap * kLog2eD);
    p.score.tanh_k = static_cast<float>(2.0 * kLog2eD * f.scale / f.softcap);
  }
  if (f.has(TensorId::sink)) p.sink_stride = f.t(TensorId::sink).strides[0];
  p.bias_unit = static_cast<float>(f.has_softcap ? kLog2eD : 1.0 / f.scale);
  if (f.has_softcap) {
    // The folded softcap (kernels/sm90/softcap_split.cuh): scores less the cap, which the
    // epilogue gives back to the LSE.
    p.softcap_neg_a = static_cast<float>(-1.0 / (2.0 * f.softcap * kLog2eD));
    p.lse_shift = static_cast<float>(f.softcap);
    p.fixed_max_rows = c.fixed_max;
    if (c.fixed_max) p.fixed_max = static_cast<float>(-fixed_max_shift(f));
  }
  p.score.mask = kernels::BandMask::from(f.mask);
  p.score.has_mask = f.mask.is_band();
  const FwdTileShape& shape = fwd_tile_shape(c.tile);
  const bool lpt = c.schedule == FwdSchedule::lpt || c.schedule == FwdSchedule::lpt_snake ||
                   c.schedule == FwdSchedule::lpt_l2;
  const bool snake = c.schedule == FwdSchedule::lpt_snake || c.schedule == FwdSchedule::lpt_l2;
  // A bias broadcast over the batch: the list runs a query tile's batches side by side (the
  // score-mod kernel swaps the decoded head and batch back), so that the CTAs in flight share its
  // bias tiles in L2 rather than reading them from HBM once per batch.
  p.batches_inner = c.score_mod && f.b > 1 && f.has(TensorId::bias) &&
                    (f.t(TensorId::bias).dims[0] == 1 || f.t(TensorId::bias).strides[0] == 0);
  p.tiles = kernels::PersistentTileScheduler::make(
      (f.s_q + shape.block_m - 1) / shape.block_m, p.batches_inner ? f.b : f.h_q,
      p.batches_inner ? f.h_q : f.b, heavy_last_m(f), lpt, snake,
      c.schedule == FwdSchedule::lpt_l2 ? l2_section_pairs(f) : 0);
  p.group_div = kernels::FastDivisor(static_cast<uint32_t>(f.group));
  return p;
}

// Q's map: boxes of one consumer warpgroup's 64 rows and one 64-column chunk (fwd_mainloop.cuh's
// load_q: each warpgroup's rows load on their own barrier).
TmaTensor q_rows_tensor(const Facts& f) {
  TmaTensor t = tma_tensor(f, TensorId::q, 64);
  t.box_chunks = 1;
  return t;
}

// K's and V's boxes: a key tile, or a paged cache's boxes within one page.
int kv_box_rows(const Facts& f, FwdTile tile) {
  const int block_n = fwd_tile_shape(tile).block_n;
  return f.paged_kv ? paged_box_rows(f, block_n) : block_n;
}

class Sm90ForwardPlan final : public tensor_core::TensorCoreLaunchPlan {
 public:
  Sm90ForwardPlan(const Facts& f, const FwdParams& params, const FwdKernel* kernel, FwdTile tile,
                  FwdSchedule schedule, unsigned grid, const StepFunctions& functions)
      : params_(params),
        q_(q_rows_tensor(f)),
        k_(tma_tensor(f, TensorId::k, kv_box_rows(f, tile))),
        v_(tma_tensor(f, TensorId::v, kv_box_rows(f, tile))),
        kernel_(kernel),
        tile_(tile),
        schedule_(schedule),
        grid_(grid),
        functions_(functions),
        has_sink_(f.has(TensorId::sink)) {
    if (f.has(TensorId::bias)) {
      params_.has_bias = true;
      bias_ = tma_bias(f, fwd_tile_shape(tile).block_m, &params_.bias_b_step, &params_.bias_h_step);
    }
  }

  // TMA reads the bias too: its base, like Q's, K's and V's, needs 16 bytes.
  size_t pointer_alignment(TensorId id, const Facts& facts) const override {
    if (id == TensorId::bias) return 16;
    return TensorCoreLaunchPlan::pointer_alignment(id, facts);
  }

  // Encodes the tensor maps (three, four with a bias; host only: no allocation, no sync), then
  // launches.
  Status launch(const Facts& facts, const Arguments& args, const Workspace&,
                Stream stream) const override {
    FwdParams p = params_;
    TmaTensor q = q_, k = k_, v = v_;
    q.base = args.get(TensorId::q);
    k.base = args.get(TensorId::k);
    v.base = args.get(TensorId::v);
    if (!encode_tma(q, &p.tma_q) || !encode_tma(k, &p.tma_k) || !encode_tma(v, &p.tma_v)) {
      return Status(Code::device_error, std::string("sm90: encoding the TMA descriptors of ") +
                                            kernel_->name + " failed (cuTensorMapEncodeTiled)");
    }
    if (params_.has_bias) {
      TmaMatrix bias = bias_;
      bias.base = args.get(TensorId::bias);
      if (!encode_tma(bias, &p.tma_bias)) {
        return Status(Code::device_error,
                      std::string("sm90: encoding the bias's TMA descriptor of ") + kernel_->name +
                          " failed (cuTensorMapEncodeTiled)");
      }
    }
    if (facts.has(TensorId::sink)) p.sink = static_cast<const float*>(args.get(TensorId::sink));
    p.o = args.get(TensorId::o);
    if (facts.has(TensorId::stats)) p.stats = static_cast<float*>(args.get(TensorId::stats));
    if (facts.has(TensorId::seq_len_q))
      p.lens.q = static_cast<const int32_t*>(args.get(TensorId::seq_len_q));
    if (facts.has(TensorId::seq_len_kv))
      p.lens.kv = static_cast<const int32_t*>(args.get(TensorId::seq_len_kv));
    // Ragged sides and pages: the slots' offsets and valid lengths, the block table (read on
    // the device only).
    if (facts.serving()) set_serving_pointers(facts, args, p.serve);
    return launch_steps(
        "sm90", *kernel_, functions_, grid_, [&](int) { return grid_; }, p, stream);
  }

  std::string describe() const override {
    const FwdTileShape& s = fwd_tile_shape(tile_);
    return std::string(kernel_->name) + ": tile " + s.name + ", " + std::to_string(s.block_m) +
           " queries x " + std::to_string(s.block_n) + " keys, " +
           std::to_string(s.consumer_warpgroups) + " consumer warpgroups, " +
           std::to_string(s.stages) + " K/V stages, " + std::to_string(grid_) + " CTAs (" +
           to_string(schedule_, grid_ >= params_.tiles.tiles) + ", " +
           std::to_string(params_.tiles.tiles) + " query tiles)" + serving() + score_mods();
  }

 private:
  // The serving kernel's sides, for describe().
  std::string serving() const {
    const kernels::ServingRows& s = params_.serve;
    std::string text;
    if (s.ragged_q || s.ragged_kv) {
      text = std::string("; ragged ") +
             (s.ragged_q && s.ragged_kv ? "q and kv"
              : s.ragged_q              ? "q"
                                        : "kv") +
             " (rows at each slot's offset, writes within the slot)";
    }
    if (s.paged_kv) {
      text += "; paged kv (pages of " + std::to_string(s.page_size.d) + " rows, boxes of " +
              std::to_string(params_.paged_box_rows) + " from the block table" +
              (params_.paged_batched != 0 ? ", a tile's pages read together)" : ")");
    }
    return text;
  }

  // The score-mod kernel's features, for describe().
  std::string score_mods() const {
    if (!params_.score.has_softcap && !params_.has_bias && !has_sink_) return "";
    std::string mods;
    auto add = [&](const char* m) { mods += (mods.empty() ? "" : ", ") + std::string(m); };
    if (params_.score.has_softcap) add("softcap");
    if (params_.has_bias) {
      add(params_.batches_inner ? "bias staged by TMA beside K and V (broadcast over b: a tile's "
                                  "batches side by side)"
                                : "bias staged by TMA beside K and V");
    }
    if (has_sink_) add("sink");
    return "; score mods: " + mods;
  }

  FwdParams params_;
  TmaTensor q_, k_, v_;
  const FwdKernel* kernel_;
  FwdTile tile_;
  FwdSchedule schedule_;
  unsigned grid_;
  StepFunctions functions_;  // resolved at plan time (null for a target without a device)
  bool has_sink_ = false;
  TmaMatrix bias_;  // with a bias: its tensor map, without the base
};

}  // namespace

std::string forward_decline_reason(const Facts& facts, const Target& target) {
  return choose_forward(facts, target, nullptr);
}

Result<std::unique_ptr<const LaunchPlan>> plan_forward(const Facts& facts, const Target& target) {
  const Result<FwdChoice> c = tensor_core::accepted_choice<FwdChoice>(
      "sm90", [&](FwdChoice* out) { return choose_forward(facts, target, out); });
  if (!c) return c.status();
  const FwdParams params = make_params(facts, *c);
  // Persistent: one CTA per SM (each needs most of an SM's shared memory or registers).
  const unsigned grid =
      static_cast<unsigned>(kernels::PersistentTileScheduler::grid(params.tiles, c->ctas));
  StepFunctions functions;
  if (Status st = resolve_steps("sm90", c->kernel->name, c->kernel->steps, target, &functions);
      !st) {
    return st;
  }
  return tensor_core::prepared_plan<Sm90ForwardPlan>(
      "sm90", *c->kernel, target, facts, params, c->kernel, c->tile, c->schedule, grid, functions);
}

}  // namespace floe::detail::sm90
