#include "engines/decode/decode_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "engines/decode/decode_kernels.h"
#include "engines/generic/generic_kernels.h"
#include "engines/generic/generic_launch_plan.h"
#include "engines/serving_sides.h"

namespace floe::detail::decode {
namespace {

constexpr int64_t kMinSplitTiles = 2;  // a split below 128 keys costs more to merge than it saves
constexpr int64_t kMaxSplits = 128;
// d128: a grid's CTAs of at most this many key tiles may take the two-stage pipeline.
constexpr int64_t kShortCtaTiles = 64;

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

bool is_pow2(int64_t x) {
  return x > 0 && (x & (x - 1)) == 0;
}

// The rule the 16-byte row loads need of K or V: unit d stride, every other stride a multiple
// of 8 elements (16 bytes); empty when kept.
std::string row_rule(const Facts& f, TensorId id) {
  const TensorDesc& d = f.t(id);
  const int last = d.rank - 1;
  const std::string name = std::string("tensor '") + to_string(id) + "' strides: ";
  if (d.strides[last] != 1) return name + "decode needs a unit stride along the head dim";
  for (int i = 0; i < last; ++i) {
    if (d.strides[i] % 8 != 0) {
      return name +
             "decode needs every stride but the head dim's to be a multiple of 8 "
             "elements (16-byte rows)";
    }
  }
  return "";
}

int64_t m_tiles_of(const Facts& f) {
  return ceil_div(f.s_q * f.group, kBlockM);
}

// Splits for the envelope: the smallest count whose last wave keeps the GPU >= 95% as busy as
// the best count would (FA3's rule, at 95%: a wave of 2 CTAs an SM on all but a few SMs), at least
// kMinSplitTiles tiles a split.
int64_t pick_splits(const Facts& f, const Target& target) {
  if (f.split_tokens > 0) return ceil_div(f.s_kv, f.split_tokens);
  const size_t smem = attention_smem_bytes(static_cast<int>(f.d_qk)) + 1024;
  const size_t per_sm = target.smem_per_block_optin + 1024;
  const int64_t per = std::clamp<int64_t>(static_cast<int64_t>(per_sm / smem), 1, 4);
  const int64_t slots = std::max<int64_t>(1, target.sm_count) * per;
  const int64_t units = f.b * f.h_kv * m_tiles_of(f);
  const int64_t limit =
      std::clamp<int64_t>(ceil_div(ceil_div(f.s_kv, kBlockN), kMinSplitTiles), 1, kMaxSplits);
  double eff[kMaxSplits + 1] = {};
  double best = 0;
  for (int64_t n = 1; n <= limit; ++n) {
    const double work = static_cast<double>(units) * static_cast<double>(n);
    const double waves = std::ceil(work / static_cast<double>(slots));
    eff[n] = work / (waves * static_cast<double>(slots));
    best = std::max(best, eff[n]);
  }
  for (int64_t n = 1; n <= limit; ++n) {
    if (eff[n] >= 0.95 * best) return n;
  }
  return 1;
}

// d128: two stages (3 CTAs an SM) for grids of at least 2.5 waves of them whose CTAs are short
// (at most kShortCtaTiles key tiles at the envelope), three (2 CTAs an SM, a deeper pipeline
// each) otherwise. Measured on the H200 (docs/perf.md, session 9): two stages win where many
// short CTAs follow one another (split1024 B 64 S 8k, 16 tiles a CTA: 0.544 against 0.595 ms),
// three where the CTAs are long (B 128 S 16k, 256 tiles a CTA: 1.942 against 2.011 ms, since
// the table ring) or the grid runs one or two waves (B 64 S 8k: 0.499 against 0.651 ms).
int pick_stages(const Facts& f, const Target& target, int64_t max_splits) {
  if (f.d_qk != 128) return 0;
  if (attention_smem_bytes(128, 3) > target.smem_per_block_optin) return 2;  // sm_86, sm_89
  const size_t smem = attention_smem_bytes(128, 2) + 1024;
  const size_t per_sm = target.smem_per_block_optin + 1024;
  const int64_t per = std::clamp<int64_t>(static_cast<int64_t>(per_sm / smem), 1, 3);
  if (per < 3) return 3;
  const double ctas = static_cast<double>(f.b * f.h_kv * m_tiles_of(f) * max_splits);
  // A CTA's tiles at the envelope: a split of split_tokens keys, or a dynamic chunk of
  // ceil(tiles / max_splits) (uniform lengths at the envelope).
  const int64_t keys = f.split_tokens > 0 ? std::min(f.split_tokens, f.s_kv) : f.s_kv;
  const int64_t tiles = ceil_div(ceil_div(keys, kBlockN), f.split_tokens > 0 ? 1 : max_splits);
  const bool many_waves = ctas >= 2.5 * static_cast<double>(std::max(1, target.sm_count) * per);
  return many_waves && tiles <= kShortCtaTiles ? 2 : 3;
}

}  // namespace

std::string decline_reason(const Facts& f, const Target& target) {
  // The decode kernels build with the generic engine's architectures (FLOE_CUDA_ARCHS).
  if (std::string why = generic::check_target(target); !why.empty()) return why;
  if (f.backward()) return "backward: decode serves the forward only";
  if (f.s_q > kMaxQueries) {
    return "s_q " + std::to_string(f.s_q) +
           ": not a decode problem (decode serves s_q <= " + std::to_string(kMaxQueries) +
           " per sequence)";
  }
  if (f.d_qk != f.d_v || (f.d_qk != 64 && f.d_qk != 128)) {
    return "d_qk " + std::to_string(f.d_qk) + ", d_v " + std::to_string(f.d_v) +
           ": decode serves d_qk = d_v in {64, 128}";
  }
  if (f.has(TensorId::bias)) return "bias: decode serves no additive bias";
  if (f.paged_kv && (!is_pow2(f.page_size) || f.page_size < 16 || f.page_size > 256)) {
    return "paged_kv page_size " + std::to_string(f.page_size) +
           ": decode serves powers of two from 16 to 256";
  }
  for (TensorId id : {TensorId::k, TensorId::v}) {
    if (std::string r = row_rule(f, id); !r.empty()) return r;
  }
  const size_t smem = attention_smem_bytes(static_cast<int>(f.d_qk), 2);  // the smallest
  if (smem > target.smem_per_block_optin) {
    return "shared memory: decode's d" + std::to_string(f.d_qk) + " kernel needs " +
           std::to_string(smem) + " bytes a block, the target allows " +
           std::to_string(target.smem_per_block_optin);
  }
  constexpr int64_t kMaxKeys = std::numeric_limits<int32_t>::max() - 2 * kBlockN;
  if (f.s_kv > kMaxKeys || f.s_q * f.group > std::numeric_limits<int32_t>::max()) {
    return "s_kv must not exceed 2^31 - 129 keys";
  }
  if (f.b > std::numeric_limits<int32_t>::max() || f.h_q > std::numeric_limits<int32_t>::max()) {
    return "b and h_q must fit 32 bits";
  }
  const int64_t splits = pick_splits(f, target);
  const double ctas = static_cast<double>(f.b) * static_cast<double>(f.h_kv) *
                      static_cast<double>(m_tiles_of(f)) *
                      static_cast<double>(f.split_tokens > 0 ? splits : splits + 1);
  if (ctas > static_cast<double>(std::numeric_limits<int32_t>::max())) {
    return "b * h_kv * (splits + 1) * ceil(s_q * h_q / h_kv / 16) must not exceed 2^31 - 1 CTAs";
  }
  return "";
}

Params make_params(const Facts& f, const Target& target) {
  Params p;
  // A tensor's [b, h, s] strides: as declared, or for a ragged side [T, H, D] (stats [T, H])
  // {0, head, token}, or for the paged K and V [page, row, head, d] {page, head, row}.
  const auto strides = [&](TensorId id, bool ragged) -> kernels::Strides3 {
    if (!f.has(id)) return {};
    const auto& s = f.t(id).strides;
    if (ragged) return {0, s[1], s[0]};
    if (f.paged_kv && (id == TensorId::k || id == TensorId::v)) return {s[0], s[2], s[1]};
    return {s[0], s[1], s[2]};
  };
  const auto d_stride = [&](TensorId id) { return f.t(id).strides[f.t(id).rank - 1]; };
  p.ragged_q = f.ragged_q;
  p.ragged_kv = f.ragged_kv;
  p.paged_kv = f.paged_kv;
  p.q_strides = strides(TensorId::q, f.ragged_q);
  p.o_strides = strides(TensorId::o, f.ragged_q);
  p.stats_strides = strides(TensorId::stats, f.ragged_q);
  p.q_d_stride = d_stride(TensorId::q);
  p.o_d_stride = d_stride(TensorId::o);
  p.k_strides = strides(TensorId::k, f.ragged_kv);
  p.v_strides = strides(TensorId::v, f.ragged_kv);
  if (f.has(TensorId::sink)) p.sink_stride = f.t(TensorId::sink).strides[0];
  if (f.has(TensorId::seq_len_q)) p.lens.q_stride = f.t(TensorId::seq_len_q).strides[0];
  if (f.has(TensorId::seq_len_kv)) p.lens.kv_stride = f.t(TensorId::seq_len_kv).strides[0];
  if (f.ragged_q) p.rq = ragged_side(f, /*query=*/true);
  if (f.ragged_kv) p.rkv = ragged_side(f, /*query=*/false);
  if (f.paged_kv) {
    p.pages = paged_side(f);
    while ((int64_t{1} << p.page_shift) < f.page_size) ++p.page_shift;
  }

  generic::set_problem_fields(f, p);
  p.m_tiles = static_cast<int>(m_tiles_of(f));

  p.max_splits = static_cast<int>(pick_splits(f, target));
  p.stages = pick_stages(f, target, p.max_splits);
  p.min_split_tiles = static_cast<int>(kMinSplitTiles);
  p.split_tokens = f.split_tokens;
  // Dynamic: b * max_splits CTAs a unit, and b more partial rows (one a batch boundary).
  p.slots = f.split_tokens > 0 ? 0 : static_cast<int>(f.b * (p.max_splits + 1));
  return p;
}

bool uses_partials(const Params& p) {
  return p.split_tokens > 0 ? p.max_splits > 1 : true;
}

void add_workspace(const Facts& f, const Params& p, WorkspaceLayout& workspace) {
  if (!uses_partials(p)) return;
  const int64_t rows = p.split_tokens > 0 ? p.max_splits * f.b : p.slots;
  workspace.add(kPartialOChunk,
                saturating_bytes({rows, f.h_q, f.s_q, f.d_v, int64_t{sizeof(float)}}));
  workspace.add(kPartialLseChunk, saturating_bytes({rows, f.h_q, f.s_q, int64_t{sizeof(float)}}));
  workspace.add(kArrivalsChunk, arrivals_bytes(p));
}

size_t arrivals_bytes(const Params& p) {
  return saturating_bytes(
      {int64_t{p.b}, int64_t{p.h_kv}, int64_t{p.m_tiles}, int64_t{sizeof(int32_t)}});
}

}  // namespace floe::detail::decode
