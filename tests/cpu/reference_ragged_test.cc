// Ragged (THD) and paged problems on the reference engine (DESIGN 2.1, 2.2), against an
// independent check: a ragged problem equals the dense problems of its sequences run one by
// one, and a paged problem equals the dense one over the gathered keys. Both sides run the
// same fp64 loops over the same rounded inputs, so they must agree bit for bit. Every run goes
// through the case library's guarded buffers: outputs poisoned, stride gaps poisoned,
// canaries checked, so a token outside every slot must come back still poisoned (NaN).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "case_folder.h"
#include "floe/floe.h"
#include "support/host_arrays.h"

namespace floe::tool {
namespace {

using test::int_array;
using test::random_array;

constexpr float kInf = std::numeric_limits<float>::infinity();

// The options every problem of one test shares, applied alike to the ragged or paged problem
// and to its dense counterparts.
struct Options {
  bool causal = false;  // bottom-right causal with a window of 5
  bool softcap = false;
  bool sink = false;
  bool bias = false;               // bias [B, Hq, Sq, Skv]
  bool heads_major_stats = false;  // stats strides [1, T] (FlashAttention's [H, T])
  bool seq_len_q = false;          // valid lengths inside padded query slots
  bool seq_len_kv = false;
  DType offsets = DType::i32;
};

void apply(const Options& o, Problem& p) {
  if (o.causal) p.set_window(5, 0, MaskAlign::bottom_right);
  if (o.softcap) p.set_softcap(3.0);
  if (o.sink) p.set_sink();
  p.set_scale(0.3);
}

Result<RunResult> run(const Problem& p, const ArrayMap& inputs) {
  Case c;
  c.problem = p;
  c.inputs = inputs;
  return run_case(c, "reference", Memory::host);
}

struct Slots {
  std::vector<int64_t> offsets;  // B + 1
  std::vector<int64_t> seq_len;  // B, when given
  std::vector<int64_t> len;      // the effective lengths DESIGN 2.1 defines
  int64_t total = 0;
};

// Slots of random widths in [0, max_width] (wider than the envelope sometimes: the rows past
// it are padding), some empty, then a tail of tokens past the last slot.
Slots make_slots(std::mt19937& rng, int64_t b, int64_t envelope, bool with_seq_len) {
  Slots s;
  std::uniform_int_distribution<int64_t> width(0, envelope + 3);
  s.offsets.push_back(0);
  for (int64_t i = 0; i < b; ++i) {
    const int64_t w = i == 1 ? 0 : width(rng);
    s.offsets.push_back(s.offsets.back() + w);
    int64_t l = w;
    if (with_seq_len) {
      const int64_t given = std::uniform_int_distribution<int64_t>(0, w)(rng);
      s.seq_len.push_back(given);
      l = given;
    }
    s.len.push_back(std::min(l, envelope));
  }
  s.total = s.offsets.back() + 3;
  return s;
}

// Rows [start, start + n) of a [T, H, D] (or [T, H]) array as a [1, H, max(n, 1), D] (or
// [1, H, max(n, 1)]) dense array; a zero-length batch gets one row of zeros, which its
// length (0) hides.
HostArray gather_rows(const HostArray& a, int64_t start, int64_t n) {
  const int64_t h = a.shape[1];
  const int64_t d = a.shape.size() == 3 ? a.shape[2] : 1;
  const int64_t rows = std::max<int64_t>(n, 1);
  HostArray out;
  out.shape = {1, h, rows};
  if (a.shape.size() == 3) out.shape.push_back(d);
  out.data.assign(static_cast<size_t>(h * rows * d), 0.f);
  for (int64_t hh = 0; hh < h; ++hh) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t dd = 0; dd < d; ++dd) {
        out.data[static_cast<size_t>((hh * rows + i) * d + dd)] =
            a.data[static_cast<size_t>(((start + i) * h + hh) * d + dd)];
      }
    }
  }
  return out;
}

// bias[b, :, :rows_q, :rows_kv] as [1, H, rows_q, rows_kv].
HostArray slice_bias(const HostArray& bias, int64_t b, int64_t rows_q, int64_t rows_kv) {
  const int64_t h = bias.shape[1], sq = bias.shape[2], skv = bias.shape[3];
  HostArray out;
  out.shape = {1, h, rows_q, rows_kv};
  for (int64_t hh = 0; hh < h; ++hh) {
    for (int64_t i = 0; i < rows_q; ++i) {
      for (int64_t j = 0; j < rows_kv; ++j) {
        out.data.push_back(bias.data[static_cast<size_t>(((b * h + hh) * sq + i) * skv + j)]);
      }
    }
  }
  return out;
}

// Element [t, h, d] of a packed array, and [0, h, i, d] of a per-sequence dense one.
float packed_at(const HostArray& a, int64_t t, int64_t h, int64_t d) {
  const int64_t hd = a.shape[1], dd = a.shape.size() == 3 ? a.shape[2] : 1;
  return a.data[static_cast<size_t>((t * hd + h) * dd + d)];
}
float dense_at(const HostArray& a, int64_t h, int64_t i, int64_t d) {
  const int64_t rows = a.shape[2], dd = a.shape.size() == 4 ? a.shape[3] : 1;
  return a.data[static_cast<size_t>((h * rows + i) * dd + d)];
}

// Float equality that treats NaN as equal to NaN (the reference is bitwise deterministic).
bool same(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

// Checks a packed output against per-sequence dense outputs: rows of each slot below its
// length equal the dense rows, the rest of the slot is `pad`, tokens outside every slot still
// hold the poison (NaN). Returns the number of mismatches (each reported once per kind).
int check_packed(const std::string& name, const HostArray& packed, const Slots& s,
                 const std::vector<HostArray>& dense, float pad) {
  const int64_t h = packed.shape[1], d = packed.shape.size() == 3 ? packed.shape[2] : 1;
  int bad = 0;
  std::vector<int> owner(static_cast<size_t>(s.total), -1);
  for (size_t b = 0; b + 1 < s.offsets.size(); ++b) {
    for (int64_t t = s.offsets[b]; t < s.offsets[b + 1]; ++t) owner[t] = static_cast<int>(b);
  }
  for (int64_t t = 0; t < s.total; ++t) {
    for (int64_t hh = 0; hh < h; ++hh) {
      for (int64_t dd = 0; dd < d; ++dd) {
        const float got = packed_at(packed, t, hh, dd);
        float want = std::numeric_limits<float>::quiet_NaN();
        const char* what = "outside every slot (must stay poisoned)";
        if (owner[t] >= 0) {
          const int64_t b = owner[t], i = t - s.offsets[b];
          if (i < s.len[b]) {
            want = dense_at(dense[b], hh, i, dd);
            what = "a row";
          } else {
            want = pad;
            what = "a padding row";
          }
        }
        if (!same(got, want) && bad++ < 3) {
          ADD_FAILURE() << name << " token " << t << " head " << hh << " d " << dd << " (" << what
                        << "): got " << got << ", want " << want;
        }
      }
    }
  }
  return bad;
}

Problem dense_problem(Direction dir, const Shape& s, const Options& o) {
  Problem p = dir == Direction::forward ? Problem::forward(s, DType::bf16)
                                        : Problem::backward(s, DType::bf16);
  apply(o, p);
  if (o.bias) p.set_bias(s.b, s.h_q);
  if (dir == Direction::forward) p.set_stats();
  return p;
}

struct RaggedCase {
  Shape shape;
  Options opt;
  Slots q, kv;
  Problem problem = Problem::forward(Shape{}, DType::bf16);
  ArrayMap in;
};

RaggedCase make_ragged(Direction dir, const Options& opt, uint32_t seed) {
  std::mt19937 rng(seed);
  RaggedCase c;
  c.opt = opt;
  c.shape = Shape{4, 4, 2, 6, 7, 16, 8};
  const Shape& s = c.shape;
  c.q = make_slots(rng, s.b, s.s_q, opt.seq_len_q);
  c.kv = make_slots(rng, s.b, s.s_kv, opt.seq_len_kv);
  Problem p = dir == Direction::forward ? Problem::forward(s, DType::bf16)
                                        : Problem::backward(s, DType::bf16);
  p.set_ragged_q(c.q.total, opt.offsets).set_ragged_kv(c.kv.total, opt.offsets);
  apply(opt, p);
  if (opt.bias) p.set_bias(s.b, s.h_q);
  if (opt.seq_len_q) p.set_seq_len_q();
  if (opt.seq_len_kv) p.set_seq_len_kv();
  if (dir == Direction::forward) p.set_stats();
  if (opt.heads_major_stats) p.set_strides(TensorId::stats, {1, c.q.total});
  c.problem = p;

  c.in["q"] = random_array({c.q.total, s.h_q, s.d_qk}, rng);
  c.in["k"] = random_array({c.kv.total, s.h_kv, s.d_qk}, rng);
  c.in["v"] = random_array({c.kv.total, s.h_kv, s.d_v}, rng);
  if (opt.bias) c.in["bias"] = random_array({s.b, s.h_q, s.s_q, s.s_kv}, rng);
  if (opt.sink) c.in["sink"] = random_array({s.h_q}, rng);
  c.in["offsets_q"] = int_array({s.b + 1}, c.q.offsets);
  c.in["offsets_kv"] = int_array({s.b + 1}, c.kv.offsets);
  if (opt.seq_len_q) c.in["seq_len_q"] = int_array({s.b}, c.q.seq_len);
  if (opt.seq_len_kv) c.in["seq_len_kv"] = int_array({s.b}, c.kv.seq_len);
  return c;
}

// The dense problem and inputs of batch b alone: lengths [sq_b], [skv_b] over one-row-at-least
// envelopes (a zero length has no dense shape of its own).
std::pair<Problem, ArrayMap> sequence_of(const RaggedCase& c, Direction dir, int64_t b,
                                         const ArrayMap& packed) {
  const Shape& s = c.shape;
  const int64_t sq = c.q.len[b], skv = c.kv.len[b];
  const int64_t rq = std::max<int64_t>(sq, 1), rkv = std::max<int64_t>(skv, 1);
  Problem p = dense_problem(dir, Shape{1, s.h_q, s.h_kv, rq, rkv, s.d_qk, s.d_v}, c.opt);
  p.set_seq_len_q().set_seq_len_kv();
  ArrayMap in;
  const int64_t q0 = c.q.offsets[b], k0 = c.kv.offsets[b];
  for (const char* n : {"q", "o", "do", "stats"}) {
    if (packed.count(n)) in[n] = gather_rows(packed.at(n), q0, sq);
  }
  for (const char* n : {"k", "v"}) in[n] = gather_rows(packed.at(n), k0, skv);
  if (c.opt.bias) in["bias"] = slice_bias(packed.at("bias"), b, rq, rkv);
  if (c.opt.sink) in["sink"] = packed.at("sink");
  in["seq_len_q"] = int_array({1}, {sq});
  in["seq_len_kv"] = int_array({1}, {skv});
  return {p, in};
}

std::vector<Options> option_sets() {
  std::vector<Options> sets;
  Options plain;
  sets.push_back(plain);
  Options padded = plain;
  padded.seq_len_q = padded.seq_len_kv = true;
  padded.causal = true;
  sets.push_back(padded);
  Options everything = padded;
  everything.softcap = everything.sink = everything.bias = true;
  everything.heads_major_stats = true;
  everything.offsets = DType::i64;
  sets.push_back(everything);
  Options fa = plain;  // FlashAttention's varlen: i32 offsets, [H, T] stats, causal
  fa.causal = true;
  fa.heads_major_stats = true;
  sets.push_back(fa);
  return sets;
}

TEST(ReferenceRagged, ForwardEqualsEachSequenceAlone) {
  uint32_t seed = 11;
  for (const Options& opt : option_sets()) {
    for (int rep = 0; rep < 3; ++rep) {
      SCOPED_TRACE("option set seed " + std::to_string(seed));
      const RaggedCase c = make_ragged(Direction::forward, opt, seed++);
      Result<RunResult> r = run(c.problem, c.in);
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(r->engine, "reference");
      std::vector<HostArray> o, stats;
      for (int64_t b = 0; b < c.shape.b; ++b) {
        auto [p, in] = sequence_of(c, Direction::forward, b, c.in);
        Result<RunResult> d = run(p, in);
        ASSERT_TRUE(d.ok()) << d.status().message();
        o.push_back(d->outputs.at("o"));
        stats.push_back(d->outputs.at("stats"));
      }
      EXPECT_EQ(check_packed("o", r->outputs.at("o"), c.q, o, 0.f), 0);
      EXPECT_EQ(check_packed("stats", r->outputs.at("stats"), c.q, stats, -kInf), 0);
    }
  }
}

TEST(ReferenceRagged, BackwardEqualsEachSequenceAlone) {
  uint32_t seed = 101;
  for (const Options& opt : option_sets()) {
    for (int rep = 0; rep < 2; ++rep) {
      SCOPED_TRACE("option set seed " + std::to_string(seed));
      const uint32_t this_seed = seed++;
      // The forward gives O and stats; dO is fresh. Tokens outside every slot keep random
      // values (the backward must not read them).
      RaggedCase fc = make_ragged(Direction::forward, opt, this_seed);
      Result<RunResult> f = run(fc.problem, fc.in);
      ASSERT_TRUE(f.ok()) << f.status().message();
      RaggedCase c = make_ragged(Direction::backward, opt, this_seed);
      std::mt19937 rng(this_seed + 7);
      const Shape& s = c.shape;
      c.in["o"] = f->outputs.at("o");
      c.in["stats"] = f->outputs.at("stats");
      for (const char* name : {"o", "stats"}) {
        for (float& x : c.in[name].data) {
          if (std::isnan(x)) x = 0.5f;  // a token outside every slot: never read
        }
      }
      c.in["do"] = random_array({c.q.total, s.h_q, s.d_v}, rng);
      Result<RunResult> r = run(c.problem, c.in);
      ASSERT_TRUE(r.ok()) << r.status().message();
      std::vector<HostArray> dq, dk, dv;
      std::vector<double> dsink(static_cast<size_t>(s.h_q), 0.0);
      for (int64_t b = 0; b < s.b; ++b) {
        auto [p, in] = sequence_of(c, Direction::backward, b, c.in);
        Result<RunResult> d = run(p, in);
        ASSERT_TRUE(d.ok()) << d.status().message();
        dq.push_back(d->outputs.at("dq"));
        dk.push_back(d->outputs.at("dk"));
        dv.push_back(d->outputs.at("dv"));
        if (opt.sink) {
          for (int64_t h = 0; h < s.h_q; ++h) dsink[h] += d->outputs.at("dsink").data[h];
        }
        if (opt.bias) {
          // dbias of batch b: the sequence's own in its corner, zero elsewhere.
          const HostArray& got = r->outputs.at("dbias");
          const HostArray& want = d->outputs.at("dbias");
          int bad = 0;
          for (int64_t h = 0; h < s.h_q; ++h) {
            for (int64_t i = 0; i < s.s_q; ++i) {
              for (int64_t j = 0; j < s.s_kv; ++j) {
                const float g =
                    got.data[static_cast<size_t>(((b * s.h_q + h) * s.s_q + i) * s.s_kv + j)];
                const bool inside = i < c.q.len[b] && j < c.kv.len[b];
                const float w = inside ? want.data[static_cast<size_t>(
                                             (h * want.shape[2] + i) * want.shape[3] + j)]
                                       : 0.f;
                if (!same(g, w) && bad++ < 3) {
                  ADD_FAILURE() << "dbias [" << b << ", " << h << ", " << i << ", " << j
                                << "]: got " << g << ", want " << w;
                }
              }
            }
          }
        }
      }
      EXPECT_EQ(check_packed("dq", r->outputs.at("dq"), c.q, dq, 0.f), 0);
      EXPECT_EQ(check_packed("dk", r->outputs.at("dk"), c.kv, dk, 0.f), 0);
      EXPECT_EQ(check_packed("dv", r->outputs.at("dv"), c.kv, dv, 0.f), 0);
      if (opt.sink) {
        // A sum over batches: the per-sequence sums are rounded to float before adding.
        for (int64_t h = 0; h < s.h_q; ++h) {
          const double got = r->outputs.at("dsink").data[h];
          EXPECT_NEAR(got, dsink[h], 1e-5 * (1.0 + std::fabs(dsink[h]))) << "dsink head " << h;
        }
      }
    }
  }
}

// Offsets and lengths past the envelope are clamped (DESIGN 2.1): a slot running past the
// packed total, a length longer than its slot, offsets that decrease. Nothing outside the
// tensors is touched (the guards say so) and every row follows the clamped reading.
TEST(ReferenceRagged, OutOfRangeOffsetsAndLengthsAreClamped) {
  std::mt19937 rng(5);
  const Shape s{3, 2, 1, 4, 4, 8, 8};
  Problem p = Problem::forward(s, DType::bf16);
  p.set_ragged_q(6).set_ragged_kv(6).set_seq_len_q().set_stats();
  ArrayMap in;
  in["q"] = random_array({6, 2, 8}, rng);
  in["k"] = random_array({6, 1, 8}, rng);
  in["v"] = random_array({6, 1, 8}, rng);
  // Query slots [0, 3), [3, 9) -> [3, 6), [-2 -> 6, ...): the last is empty.
  in["offsets_q"] = int_array({4}, {0, 3, 9, -2});
  in["offsets_kv"] = int_array({4}, {0, 2, 4, 100});
  in["seq_len_q"] = int_array({3}, {7, 2, 5});  // 7 > slot 3: clamped to 3
  Result<RunResult> r = run(p, in);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const HostArray& stats = r->outputs.at("stats");
  for (int64_t t = 0; t < 6; ++t) {
    for (int64_t h = 0; h < 2; ++h) {
      const float x = stats.data[static_cast<size_t>(t * 2 + h)];
      if (t < 3 || t == 3 || t == 4) {
        EXPECT_TRUE(std::isfinite(x)) << "token " << t;  // rows of batches 0 and 1
      } else {
        EXPECT_EQ(x, -kInf) << "token " << t;  // batch 1's padding (length 2 in slot of 3)
      }
    }
  }
}

struct PagedCase {
  Shape shape;
  Problem problem = Problem::forward(Shape{}, DType::bf16);
  ArrayMap in;
  Problem dense = Problem::forward(Shape{}, DType::bf16);
  ArrayMap dense_in;
  Slots q;  // when the query side is ragged
};

// A paged forward and the dense forward over the gathered keys: page size `page`, pages in a
// random order, table entries past a batch's need -1, K stored head-major within a page (HND)
// when `hnd`.
PagedCase make_paged(int64_t page, bool ragged_q, bool hnd, const Options& opt, uint32_t seed) {
  std::mt19937 rng(seed);
  PagedCase c;
  c.shape = Shape{3, 4, 2, 3, 20, 16, 8};
  const Shape& s = c.shape;
  const int64_t max_pages = (s.s_kv + page - 1) / page;
  const int64_t num_pages = s.b * max_pages + 2;
  std::vector<int64_t> pages(static_cast<size_t>(num_pages));
  for (int64_t i = 0; i < num_pages; ++i) pages[i] = i;
  std::shuffle(pages.begin(), pages.end(), rng);
  std::vector<int64_t> lens = {s.s_kv, 0, 0};
  lens[1] = std::uniform_int_distribution<int64_t>(1, s.s_kv)(rng);
  lens[2] = std::uniform_int_distribution<int64_t>(0, s.s_kv)(rng);
  std::vector<int64_t> table;
  for (int64_t b = 0; b < s.b; ++b) {
    for (int64_t c2 = 0; c2 < max_pages; ++c2) {
      table.push_back(c2 * page < lens[b] ? pages[b * max_pages + c2] : -1);
    }
  }

  Problem p = Problem::forward(s, DType::bf16);
  if (ragged_q) {
    c.q = make_slots(rng, s.b, s.s_q, false);
    p.set_ragged_q(c.q.total);
  }
  p.set_paged_kv(page, num_pages);
  apply(opt, p);
  if (opt.bias) p.set_bias(1, s.h_q);
  p.set_stats();
  if (hnd) {
    p.set_strides(TensorId::k, {s.h_kv * page * s.d_qk, s.d_qk, page * s.d_qk, 1});
  }
  c.problem = p;

  const HostArray q = ragged_q ? random_array({c.q.total, s.h_q, s.d_qk}, rng)
                               : random_array({s.b, s.h_q, s.s_q, s.d_qk}, rng);
  const HostArray k = random_array({num_pages, page, s.h_kv, s.d_qk}, rng);
  const HostArray v = random_array({num_pages, page, s.h_kv, s.d_v}, rng);
  c.in["q"] = q;
  c.in["k"] = k;
  c.in["v"] = v;
  c.in["block_table"] = int_array({s.b, max_pages}, table);
  if (ragged_q) c.in["offsets_q"] = int_array({s.b + 1}, c.q.offsets);
  c.in["seq_len_kv"] = int_array({s.b}, lens);
  if (opt.bias) c.in["bias"] = random_array({1, s.h_q, s.s_q, s.s_kv}, rng);
  if (opt.sink) c.in["sink"] = random_array({s.h_q}, rng);

  // The dense twin: the same query layout, K and V gathered to [B, Hkv, Skv, D]; keys past a
  // batch's length hold garbage the lengths hide.
  Problem d = Problem::forward(s, DType::bf16);
  if (ragged_q) d.set_ragged_q(c.q.total);
  apply(opt, d);
  if (opt.bias) d.set_bias(1, s.h_q);
  d.set_seq_len_kv().set_stats();
  c.dense = d;
  c.dense_in = c.in;
  c.dense_in.erase("block_table");
  for (const char* name : {"k", "v"}) {
    const HostArray& src = c.in.at(name);
    const int64_t dd = src.shape[3];
    HostArray g = random_array({s.b, s.h_kv, s.s_kv, dd}, rng, 100.f);
    for (int64_t b = 0; b < s.b; ++b) {
      for (int64_t j = 0; j < lens[b]; ++j) {
        const int64_t pg = table[b * max_pages + j / page], row = j % page;
        for (int64_t h = 0; h < s.h_kv; ++h) {
          for (int64_t x = 0; x < dd; ++x) {
            g.data[static_cast<size_t>(((b * s.h_kv + h) * s.s_kv + j) * dd + x)] =
                src.data[static_cast<size_t>(((pg * page + row) * s.h_kv + h) * dd + x)];
          }
        }
      }
    }
    c.dense_in[name] = g;
  }
  return c;
}

TEST(ReferencePaged, ForwardEqualsTheGatheredDenseProblem) {
  uint32_t seed = 300;
  Options with_all;
  with_all.causal = with_all.softcap = with_all.sink = with_all.bias = true;
  for (int64_t page : {1, 3, 16, 32}) {
    for (bool ragged_q : {false, true}) {
      for (bool hnd : {false, true}) {
        for (const Options& opt : {Options{}, with_all}) {
          SCOPED_TRACE("page " + std::to_string(page) + (ragged_q ? " ragged q" : " dense q") +
                       (hnd ? " HND" : " NHD") + " seed " + std::to_string(seed));
          const PagedCase c = make_paged(page, ragged_q, hnd, opt, seed++);
          Result<RunResult> r = run(c.problem, c.in);
          ASSERT_TRUE(r.ok()) << r.status().message();
          Result<RunResult> d = run(c.dense, c.dense_in);
          ASSERT_TRUE(d.ok()) << d.status().message();
          for (const char* name : {"o", "stats"}) {
            const HostArray& got = r->outputs.at(name);
            const HostArray& want = d->outputs.at(name);
            ASSERT_EQ(got.shape, want.shape);
            int bad = 0;
            for (size_t i = 0; i < got.data.size(); ++i) {
              if (!same(got.data[i], want.data[i]) && bad++ < 3) {
                ADD_FAILURE() << name << " element " << i << ": got " << got.data[i] << ", want "
                              << want.data[i];
              }
            }
          }
        }
      }
    }
  }
}

// sm90 serves ragged and paged forwards (its serving kernel: both sides packed or one beside a
// dense side; pages of a multiple of 8 rows that divides its 128-key tile or is a multiple of it)
// on sm_90; what it does not serve (a ragged backward, pages of one row) it declines in explain,
// naming the option, and sm80 serves natively (its serving kernels, d128 here: the ci kernel
// set's tile), ranked first among the engines that accept; generic serves them too (pinned),
// with pages of any size. On sm_80 sm80 serves them all; sm90 names there the layout rules it
// checks before the target (a ragged backward), and the target before the tile's (page sizes).
TEST(ServingDeclines, GpuEnginesNameTheOption) {
  const Shape s{2, 8, 2, 64, 128, 128, 128};  // s_q 64: not a short (decode) query side
  const struct {
    Problem p;
    const char* option;          // sm90's decline names it; nullptr: sm90 serves it on sm_90
    bool before_target = false;  // sm90 names the option on sm_80 too
  } cases[] = {
      {Problem::forward(s, DType::bf16).set_ragged_q(40).set_ragged_kv(90), nullptr},
      {Problem::forward(s, DType::bf16).set_ragged_q(40), nullptr},
      {Problem::forward(s, DType::bf16).set_ragged_kv(40).set_stats(), nullptr},
      {Problem::forward(s, DType::bf16).set_paged_kv(64, 8), nullptr},
      {Problem::forward(s, DType::bf16).set_ragged_q(40).set_paged_kv(16, 8), nullptr},
      {Problem::forward(s, DType::bf16).set_paged_kv(1, 300), "paged_kv"},
      {Problem::backward(s, DType::bf16).set_ragged_kv(40), "ragged_kv", true},
      {Problem::backward(s, DType::bf16).set_ragged_q(40).set_bias(1, 8).set_sink(), "ragged_q",
       true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.option != nullptr ? c.option : "served by sm90");
    Result<Plan> cpu = Plan::build(c.p, Target::cpu(1));
    ASSERT_TRUE(cpu.ok()) << cpu.status().message();
    EXPECT_EQ(cpu->engine(), "reference");
    for (int arch : {80, 90}) {
      Result<Plan> gpu = Plan::build(c.p, Target::cuda_arch(arch));
      const std::string text = gpu.ok() ? gpu->explain() : gpu.status().message();
      const bool sm90_serves = c.option == nullptr && arch == 90;
      const bool names_option = c.option != nullptr && (arch == 90 || c.before_target);
      const std::string want =
          names_option  ? std::string("  sm90: declined: ") + c.option + ": "
          : sm90_serves ? std::string("  sm90: accepted\n")
                        : std::string("  sm90: declined: its kernels are built for sm_90a only");
      EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
      ASSERT_TRUE(gpu.ok()) << text;
      EXPECT_EQ(gpu->engine(), sm90_serves ? "sm90" : "sm80") << text;
      Result<Plan> generic = Plan::build(c.p, Target::cuda_arch(arch), PlanOptions{"generic"});
      const bool generic_built =
          arch == 90 || generic.ok() ||
          generic.status().message().find("no kernels built for sm_80") == std::string::npos;
      if (generic_built) EXPECT_TRUE(generic.ok()) << generic.status().message();
    }
  }
}

}  // namespace
}  // namespace floe::tool
