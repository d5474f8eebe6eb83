#include "plan/validate.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/checked_size.h"

namespace floe::detail {

namespace {

constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;

// The rank and the logical name of each dim of a tensor, as the problem's layout declares it
// (dense, ragged or paged), for the rank check and for messages.
struct DimSpec {
  int rank = 0;
  const char* names[4] = {"?", "?", "?", "?"};
};

DimSpec spec_of(const Problem& p, TensorId id) {
  const bool rq = p.ragged_q().has_value();
  const bool pk = p.paged_kv().has_value();
  const bool rk = !pk && p.ragged_kv().has_value();
  auto q_side = [&](const char* d) {
    return rq ? DimSpec{3, {"total_q", "h_q", d}} : DimSpec{4, {"b", "h_q", "s_q", d}};
  };
  auto kv_side = [&](const char* d) {
    if (pk) return DimSpec{4, {"num_pages", "page_size", "h_kv", d}};
    return rk ? DimSpec{3, {"total_kv", "h_kv", d}} : DimSpec{4, {"b", "h_kv", "s_kv", d}};
  };
  switch (id) {
    case TensorId::q:
    case TensorId::dq:
      return q_side("d_qk");
    case TensorId::o:
    case TensorId::d_o:
      return q_side("d_v");
    case TensorId::k:
    case TensorId::dk:
      return kv_side("d_qk");
    case TensorId::v:
    case TensorId::dv:
      return kv_side("d_v");
    case TensorId::stats:
      return rq ? DimSpec{2, {"total_q", "h_q"}} : DimSpec{3, {"b", "h_q", "s_q"}};
    case TensorId::bias:
    case TensorId::dbias:
      return DimSpec{4, {"b", "h_q", "s_q", "s_kv"}};
    case TensorId::sink:
    case TensorId::dsink:
      return DimSpec{1, {"h_q"}};
    case TensorId::seq_len_q:
    case TensorId::seq_len_kv:
      return DimSpec{1, {"b"}};
    case TensorId::offsets_q:
    case TensorId::offsets_kv:
      return DimSpec{1, {"b + 1"}};
    case TensorId::block_table:
      return DimSpec{2, {"b", "max_pages"}};
  }
  return DimSpec{};
}

bool is_serving(const Problem& p) {
  return p.ragged_q() || p.ragged_kv() || p.paged_kv();
}

bool is_backward_only(TensorId id) {
  return id == TensorId::d_o || id == TensorId::dq || id == TensorId::dk || id == TensorId::dv ||
         id == TensorId::dbias || id == TensorId::dsink;
}

class Checker {
 public:
  explicit Checker(const Problem& p) : p_(p) {}

  std::vector<std::string> run() {
    if (!p_.setter_error().empty()) add(p_.setter_error());
    check_declarations();
    if (!errors_.empty()) return errors_;
    for (int i = 0; i < kTensorCount; ++i) {
      const auto id = static_cast<TensorId>(i);
      if (p_.has(id)) check_tensor(id, *p_.tensor(id));
    }
    if (!errors_.empty()) return errors_;  // sizes below need sane ranks and dims
    check_sizes();
    check_outputs();
    check_scalars();
    return errors_;
  }

 private:
  void add(std::string msg) { errors_.push_back(std::move(msg)); }

  static std::string t(TensorId id) { return std::string("tensor '") + to_string(id) + "'"; }
  const char* dim_name(TensorId id, int i) const { return spec_of(p_, id).names[i]; }

  void check_declarations() {
    const Direction dir = p_.direction();
    const bool bwd = dir == Direction::backward;
    for (TensorId id : {TensorId::q, TensorId::k, TensorId::v, TensorId::o}) {
      if (!p_.has(id)) add(t(id) + ": missing; every problem needs q, k, v and o");
    }
    for (int i = 0; i < kTensorCount; ++i) {
      const auto id = static_cast<TensorId>(i);
      if (!bwd && is_backward_only(id) && p_.has(id)) {
        add(t(id) + ": declared in a forward problem; it belongs to the backward only");
      }
    }
    check_serving_declarations();
    if (bwd) {
      for (TensorId id :
           {TensorId::d_o, TensorId::stats, TensorId::dq, TensorId::dk, TensorId::dv}) {
        if (!p_.has(id)) add(t(id) + ": missing; the backward needs do, stats, dq, dk and dv");
      }
      if (p_.has(TensorId::dbias) && !p_.has(TensorId::bias)) {
        add(t(TensorId::dbias) + ": declared without a bias; dbias is the gradient of bias");
      }
      if (p_.has(TensorId::dsink) && !p_.has(TensorId::sink)) {
        add(t(TensorId::dsink) + ": declared without a sink; dsink is the gradient of sink");
      }
    }
  }

  // DESIGN 2.1 and 2.2: which options go together, and the device arrays each one needs.
  void check_serving_declarations() {
    const bool bwd = p_.direction() == Direction::backward;
    if (p_.paged_kv() && p_.ragged_kv()) {
      add("problem paged_kv: excludes ragged_kv (a key side is packed or paged, not both)");
    }
    if (p_.paged_kv() && bwd) {
      add("problem paged_kv: forward only; a backward with a paged KV cache is not defined "
          "(DESIGN 2.2)");
    }
    if (p_.paged_kv() && !p_.has(TensorId::seq_len_kv)) {
      add(t(TensorId::seq_len_kv) + ": missing; a paged KV cache needs the key length of each " +
          "batch (set_seq_len_kv)");
    }
    const struct {
      TensorId id;
      bool needed;
      const char* option;
    } arrays[] = {{TensorId::offsets_q, p_.ragged_q().has_value(), "a ragged query side"},
                  {TensorId::offsets_kv, p_.ragged_kv().has_value(), "a ragged key side"},
                  {TensorId::block_table, p_.paged_kv().has_value(), "a paged KV cache"}};
    for (const auto& a : arrays) {
      if (a.needed && !p_.has(a.id)) add(t(a.id) + ": missing; " + a.option + " needs it");
      if (!a.needed && p_.has(a.id)) {
        add(t(a.id) + ": declared, but the problem has no " + (a.option + 2) +
            " (set_ragged_q, set_ragged_kv, set_paged_kv)");
      }
    }
  }

  void check_tensor(TensorId id, const TensorDesc& d) {
    const int want_rank = spec_of(p_, id).rank;
    if (d.rank != want_rank) {
      add(t(id) + " rank: is " + std::to_string(d.rank) + ", must be " + std::to_string(want_rank));
      return;
    }
    const size_t errors_before = errors_.size();
    for (int i = 0; i < d.rank; ++i) {
      const std::string field = " dims[" + std::to_string(i) + "] (" + dim_name(id, i) + ")";
      if (d.dims[i] <= 0) {
        add(t(id) + field + " = " + std::to_string(d.dims[i]) + ": must be positive");
      } else if (d.dims[i] > kMaxDim) {
        add(t(id) + field + " = " + std::to_string(d.dims[i]) + ": must be below 2^31");
      }
      if (d.strides[i] < 0) {
        add(t(id) + " strides[" + std::to_string(i) + "] = " + std::to_string(d.strides[i]) +
            ": must not be negative");
      }
    }
    if (errors_.size() == errors_before) check_extent(id, d);
    // dtype
    const DType q_dtype = p_.has(TensorId::q) ? p_.tensor(TensorId::q)->dtype : p_.dtype();
    switch (id) {
      case TensorId::q:
        if (d.dtype != DType::f16 && d.dtype != DType::bf16) {
          add(t(id) + " dtype: is " + to_string(d.dtype) + ", must be f16 or bf16");
        }
        break;
      case TensorId::stats:
      case TensorId::sink:
      case TensorId::dsink:
        if (d.dtype != DType::f32) {
          add(t(id) + " dtype: is " + to_string(d.dtype) + ", must be f32");
        }
        break;
      case TensorId::seq_len_q:
      case TensorId::seq_len_kv:
      case TensorId::block_table:
        if (d.dtype != DType::i32) {
          add(t(id) + " dtype: is " + to_string(d.dtype) + ", must be i32");
        }
        break;
      case TensorId::offsets_q:
      case TensorId::offsets_kv:
        if (d.dtype != DType::i32 && d.dtype != DType::i64) {
          add(t(id) + " dtype: is " + to_string(d.dtype) + ", must be i32 or i64");
        }
        break;
      default:
        if (d.dtype != q_dtype) {
          add(t(id) + " dtype: is " + to_string(d.dtype) + ", must match q's (" +
              to_string(q_dtype) + ")");
        }
    }
  }

  // Every dim is below 2^31, but their product and the span are not: both must fit 64 bits
  // (element offsets and byte counts are int64 / size_t everywhere), and so must the bytes.
  void check_extent(TensorId id, const TensorDesc& d) {
    if (d.numel() == TensorDesc::kSizeOverflow) {
      add(t(id) + " dims: the element count overflows 64 bits");
    }
    if (d.span_bytes() > static_cast<size_t>(INT64_MAX)) {
      add(t(id) + " strides: the span (bytes from the first to one past the last element) " +
          "overflows 64 bits");
    }
  }

  // Checks that tensor `id` dim `i` equals `want`, which the reference tensor `ref` set.
  void expect_dim(TensorId id, int i, int64_t want, const char* from) {
    if (!p_.has(id)) return;
    const int64_t got = p_.tensor(id)->dims[i];
    if (got != want) {
      add(t(id) + " dims[" + std::to_string(i) + "] (" + dim_name(id, i) + ") = " +
          std::to_string(got) + ": must equal " + from + " (" + std::to_string(want) + ")");
    }
  }

  // A ragged or paged problem: every size comes from the envelope (the Shape given at
  // construction) and the options, since no tensor holds b, s_q or s_kv any more.
  void check_serving_sizes() {
    const Shape& s = p_.shape();
    for (const auto& [name, value] :
         {std::pair<const char*, int64_t>{"b", s.b}, {"s_q", s.s_q}, {"s_kv", s.s_kv}}) {
      if (value <= 0 || value > kMaxDim) {
        add(std::string("problem ") + name + " (envelope) = " + std::to_string(value) +
            ": must lie in [1, 2^31)");
      }
    }
    if (s.h_kv > 0 && s.h_q % s.h_kv != 0) {
      add(t(TensorId::k) + " h_kv = " + std::to_string(s.h_kv) + ": h_q (" + std::to_string(s.h_q) +
          ") must be a multiple of h_kv");
    }
    const bool rq = p_.ragged_q().has_value();
    const bool pk = p_.paged_kv().has_value();
    const bool rk = !pk && p_.ragged_kv().has_value();
    const int64_t tq = rq ? p_.ragged_q()->total : 0;
    const int64_t tkv = rk ? p_.ragged_kv()->total : 0;
    const Paged pg = pk ? *p_.paged_kv() : Paged{};
    auto q_side = [&](TensorId id, int64_t d, const char* dn) {
      if (rq) {
        expect(id, {tq, s.h_q, d}, {"ragged_q's total", "h_q", dn});
      } else {
        expect(id, {s.b, s.h_q, s.s_q, d}, {"b", "h_q", "s_q", dn});
      }
    };
    auto kv_side = [&](TensorId id, int64_t d, const char* dn) {
      if (pk) {
        expect(id, {pg.num_pages, pg.page_size, s.h_kv, d},
               {"paged_kv's num_pages", "paged_kv's page_size", "h_kv", dn});
      } else if (rk) {
        expect(id, {tkv, s.h_kv, d}, {"ragged_kv's total", "h_kv", dn});
      } else {
        expect(id, {s.b, s.h_kv, s.s_kv, d}, {"b", "h_kv", "s_kv", dn});
      }
    };
    q_side(TensorId::q, s.d_qk, "d_qk");
    q_side(TensorId::dq, s.d_qk, "d_qk");
    q_side(TensorId::o, s.d_v, "d_v");
    q_side(TensorId::d_o, s.d_v, "d_v");
    kv_side(TensorId::k, s.d_qk, "d_qk");
    kv_side(TensorId::dk, s.d_qk, "d_qk");
    kv_side(TensorId::v, s.d_v, "d_v");
    kv_side(TensorId::dv, s.d_v, "d_v");
    if (rq) {
      expect(TensorId::stats, {tq, s.h_q}, {"ragged_q's total", "h_q"});
    } else {
      expect(TensorId::stats, {s.b, s.h_q, s.s_q}, {"b", "h_q", "s_q"});
    }
    if (p_.has(TensorId::bias)) {
      const TensorDesc& bias = *p_.tensor(TensorId::bias);
      if (bias.dims[0] != 1 && bias.dims[0] != s.b) {
        add(t(TensorId::bias) + " dims[0] (b) = " + std::to_string(bias.dims[0]) +
            ": must be 1 or b (" + std::to_string(s.b) + ")");
      }
      if (bias.dims[1] != 1 && bias.dims[1] != s.h_q) {
        add(t(TensorId::bias) + " dims[1] (h_q) = " + std::to_string(bias.dims[1]) +
            ": must be 1 or h_q (" + std::to_string(s.h_q) + ")");
      }
      expect(TensorId::bias, {bias.dims[0], bias.dims[1], s.s_q, s.s_kv},
             {"itself", "itself", "s_q", "s_kv"});
      expect(TensorId::dbias, {bias.dims[0], bias.dims[1], s.s_q, s.s_kv},
             {"bias's", "bias's", "s_q", "s_kv"});
    }
    expect(TensorId::sink, {s.h_q}, {"h_q"});
    expect(TensorId::dsink, {s.h_q}, {"h_q"});
    expect(TensorId::seq_len_q, {s.b}, {"b"});
    expect(TensorId::seq_len_kv, {s.b}, {"b"});
    const int64_t b1 = s.b < INT64_MAX ? s.b + 1 : s.b;
    expect(TensorId::offsets_q, {b1}, {"b + 1"});
    expect(TensorId::offsets_kv, {b1}, {"b + 1"});
    if (pk) {
      expect(TensorId::block_table, {s.b, pg.max_pages}, {"b", "paged_kv's max_pages"});
      // The pages of the envelope's keys: key j < s_kv reads table column j / page_size.
      if (pg.page_size > 0 && pg.max_pages > 0 && (s.s_kv - 1) / pg.page_size >= pg.max_pages) {
        add(t(TensorId::block_table) + " dims[1] (max_pages) = " + std::to_string(pg.max_pages) +
            ": max_pages x page_size (" + std::to_string(pg.page_size) + ") must cover s_kv (" +
            std::to_string(s.s_kv) + ")");
      }
    }
  }

  // Tensor `id`, when declared, has exactly `want` (its rank was checked before).
  void expect(TensorId id, std::initializer_list<int64_t> want,
              std::initializer_list<const char*> from) {
    if (!p_.has(id)) return;
    const TensorDesc& d = *p_.tensor(id);
    int i = 0;
    auto name = from.begin();
    for (int64_t w : want) {
      if (i < d.rank && d.dims[i] != w) {
        add(t(id) + " dims[" + std::to_string(i) + "] (" + dim_name(id, i) + ") = " +
            std::to_string(d.dims[i]) + ": must equal " + *name + " (" + std::to_string(w) + ")");
      }
      ++i;
      ++name;
    }
  }

  void check_sizes() {
    if (is_serving(p_)) {
      check_serving_sizes();
      return;
    }
    const TensorDesc& q = *p_.tensor(TensorId::q);
    const TensorDesc& k = *p_.tensor(TensorId::k);
    const TensorDesc& v = *p_.tensor(TensorId::v);
    const int64_t b = q.dims[0], h_q = q.dims[1], s_q = q.dims[2], d_qk = q.dims[3];
    const int64_t h_kv = k.dims[1], s_kv = k.dims[2], d_v = v.dims[3];

    expect_dim(TensorId::k, 0, b, "q's b");
    expect_dim(TensorId::k, 3, d_qk, "q's d_qk");
    expect_dim(TensorId::v, 0, b, "q's b");
    expect_dim(TensorId::v, 1, h_kv, "k's h_kv");
    expect_dim(TensorId::v, 2, s_kv, "k's s_kv");
    if (h_q % h_kv != 0) {
      add(t(TensorId::k) + " dims[1] (h_kv) = " + std::to_string(h_kv) + ": h_q (" +
          std::to_string(h_q) + ") must be a multiple of h_kv");
    }
    for (TensorId id : {TensorId::o, TensorId::d_o}) {
      expect_dim(id, 0, b, "q's b");
      expect_dim(id, 1, h_q, "q's h_q");
      expect_dim(id, 2, s_q, "q's s_q");
      expect_dim(id, 3, d_v, "v's d_v");
    }
    for (int i = 0; i < 4; ++i) {
      expect_dim(TensorId::dq, i, q.dims[i], "q's");
      expect_dim(TensorId::dk, i, k.dims[i], "k's");
      expect_dim(TensorId::dv, i, v.dims[i], "v's");
    }
    expect_dim(TensorId::stats, 0, b, "q's b");
    expect_dim(TensorId::stats, 1, h_q, "q's h_q");
    expect_dim(TensorId::stats, 2, s_q, "q's s_q");
    if (p_.has(TensorId::bias)) {
      const TensorDesc& bias = *p_.tensor(TensorId::bias);
      if (bias.dims[0] != 1 && bias.dims[0] != b) {
        add(t(TensorId::bias) + " dims[0] (b) = " + std::to_string(bias.dims[0]) +
            ": must be 1 or q's b (" + std::to_string(b) + ")");
      }
      if (bias.dims[1] != 1 && bias.dims[1] != h_q) {
        add(t(TensorId::bias) + " dims[1] (h_q) = " + std::to_string(bias.dims[1]) +
            ": must be 1 or q's h_q (" + std::to_string(h_q) + ")");
      }
      expect_dim(TensorId::bias, 2, s_q, "q's s_q");
      expect_dim(TensorId::bias, 3, s_kv, "k's s_kv");
      for (int i = 0; i < 4; ++i) expect_dim(TensorId::dbias, i, bias.dims[i], "bias's");
    }
    expect_dim(TensorId::sink, 0, h_q, "q's h_q");
    expect_dim(TensorId::dsink, 0, h_q, "q's h_q");
    expect_dim(TensorId::seq_len_q, 0, b, "q's b");
    expect_dim(TensorId::seq_len_kv, 0, b, "q's b");
  }

  void check_outputs() {
    for (int i = 0; i < kTensorCount; ++i) {
      const auto id = static_cast<TensorId>(i);
      if (!p_.has(id) || !is_output(id, p_.direction())) continue;
      if (!is_non_overlapping(*p_.tensor(id))) {
        add(t(id) + " strides: the output overlaps itself (two indices address one element)");
      }
    }
  }

  void check_scalars() {
    if (p_.scale()) {
      const double s = *p_.scale();
      if (!std::isfinite(s) || s == 0.0) add("problem scale: must be finite and non-zero");
    }
    if (p_.softcap()) {
      const double c = *p_.softcap();
      if (!std::isfinite(c) || c <= 0.0) add("problem softcap: must be finite and positive");
    }
    if (p_.split_tokens() && (*p_.split_tokens() < 1 || *p_.split_tokens() > kMaxDim)) {
      add("problem split_tokens: must lie in [1, 2^31 - 1] (keys per split)");
    }
    const Mask& m = p_.mask();
    for (const auto* bound : {&m.left, &m.right}) {
      if (*bound && (**bound > kMaxDim || **bound < -kMaxDim)) {
        add(std::string("problem mask ") + (bound == &m.left ? "left" : "right") +
            ": must lie within +-(2^31 - 1)");
      }
    }
  }

  const Problem& p_;
  std::vector<std::string> errors_;
};

}  // namespace

bool is_non_overlapping(const TensorDesc& desc) {
  // Sort the dims that matter (size > 1) by stride; each must step past everything the
  // smaller ones reach. Sufficient, and exact for every layout a framework produces.
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (int i = 0; i < desc.rank; ++i) {
    if (desc.dims[i] > 1) dims.emplace_back(desc.strides[i], desc.dims[i]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;  // largest offset the smaller dims address
  for (const auto& [stride, size] : dims) {
    if (stride <= reach) return false;
    // Checked: a reach that wraps modulo 2^64 would let an aliasing layout pass.
    int64_t step;
    if (!checked_mul(stride, size - 1, &step) || !checked_add(reach, step, &reach)) return false;
  }
  return true;
}

bool is_output(TensorId id, Direction dir) {
  if (dir == Direction::forward) return id == TensorId::o || id == TensorId::stats;
  return id == TensorId::dq || id == TensorId::dk || id == TensorId::dv || id == TensorId::dbias ||
         id == TensorId::dsink;
}

std::vector<std::string> validate(const Problem& problem) {
  return Checker(problem).run();
}

Status validate_status(const Problem& problem) {
  const std::vector<std::string> errors = validate(problem);
  if (errors.empty()) return Status();
  std::string msg = errors.front();
  if (errors.size() > 1) {
    msg += " (and " + std::to_string(errors.size() - 1) + " more: ";
    for (size_t i = 1; i < errors.size(); ++i) msg += (i > 1 ? "; " : "") + errors[i];
    msg += ")";
  }
  return Status(Code::invalid_problem, msg);
}

}  // namespace floe::detail
