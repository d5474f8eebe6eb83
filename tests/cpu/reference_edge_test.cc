// The corners of DESIGN §2 checked by exact value, not just against the naive formulation:
// rows with no visible key, zero lengths, Sq = 1 and Skv = 1, sinks over fully masked rows;
// and the engine's own contract: bitwise determinism across thread counts, nothing written
// outside the outputs, a workspace it does not assume clean, and CPU targets only.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/reference_harness.h"

namespace floe::reftest {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Case make(const std::string& name, int64_t b, int64_t h_q, int64_t h_kv, int64_t s_q, int64_t s_kv,
          int64_t d = 8) {
  Case c;
  c.name = name;
  c.spec.b = b, c.spec.h_q = h_q, c.spec.h_kv = h_kv, c.spec.s_q = s_q, c.spec.s_kv = s_kv;
  c.spec.d_qk = d, c.spec.d_v = d;
  c.seed = std::hash<std::string>{}(name);
  return c;
}

// Element (b, h, i, d) of a logical [B, H, S, D] array.
double at(const std::vector<double>& t, int64_t h_dim, int64_t s_dim, int64_t d_dim, int64_t b,
          int64_t h, int64_t i, int64_t d) {
  return t[static_cast<size_t>(((b * h_dim + h) * s_dim + i) * d_dim + d)];
}

EngineRun run_ok(const Case& c, Direction dir) {
  EngineRun run = run_engine(c, dir);
  EXPECT_TRUE(run.status.ok()) << run.status.message();
  for (const std::string& d : run.damage) ADD_FAILURE() << c.name << ": " << d;
  return run;
}

TEST(ReferenceEdge, RowWithNoVisibleKeyIsZeroWithInfiniteStats) {
  Case c = make("no_key", 2, 2, 1, 6, 6);
  c.spec.right = -3;  // j <= i - 3: rows 0..2 see nothing
  const Spec& s = c.spec;
  const EngineRun fwd = run_ok(c, Direction::forward);
  for (int64_t b = 0; b < s.b; ++b) {
    for (int64_t h = 0; h < s.h_q; ++h) {
      for (int64_t i = 0; i < 3; ++i) {
        EXPECT_EQ(fwd.out.lse[(b * s.h_q + h) * s.s_q + i], -kInf);
        for (int64_t d = 0; d < s.d_v; ++d) {
          EXPECT_EQ(at(fwd.out.o, s.h_q, s.s_q, s.d_v, b, h, i, d), 0.0);
        }
      }
      EXPECT_TRUE(std::isfinite(fwd.out.lse[(b * s.h_q + h) * s.s_q + 3]));
    }
  }
  const EngineRun bwd = run_ok(c, Direction::backward);
  for (int64_t b = 0; b < s.b; ++b) {
    for (int64_t h = 0; h < s.h_q; ++h) {
      for (int64_t i = 0; i < 3; ++i) {
        for (int64_t d = 0; d < s.d_qk; ++d) {
          EXPECT_EQ(at(bwd.out.dq, s.h_q, s.s_q, s.d_qk, b, h, i, d), 0.0);
        }
      }
    }
    // Keys 3..5 are seen by no row (i <= 5 means j <= 2).
    for (int64_t j = 3; j < 6; ++j) {
      for (int64_t d = 0; d < s.d_qk; ++d) {
        EXPECT_EQ(at(bwd.out.dk, s.h_kv, s.s_kv, s.d_qk, b, 0, j, d), 0.0);
        EXPECT_EQ(at(bwd.out.dv, s.h_kv, s.s_kv, s.d_v, b, 0, j, d), 0.0);
      }
    }
  }
}

TEST(ReferenceEdge, SinkOverFullyMaskedRowsGivesSigma) {
  Case c = make("sink_no_key", 2, 3, 1, 5, 5);
  c.spec.sink = true;
  c.spec.left = -1, c.spec.right = 1;  // j = i + 1 only: row 4 sees nothing (j = 5 > 4)
  c.spec.seq_q = {5, 3};
  const Spec& s = c.spec;
  const EngineRun fwd = run_ok(c, Direction::forward);
  for (int64_t b = 0; b < s.b; ++b) {
    for (int64_t h = 0; h < s.h_q; ++h) {
      const double sigma = fwd.in.sink[h];
      const double* lse = &fwd.out.lse[(b * s.h_q + h) * s.s_q];
      for (int64_t i = 0; i < s.s_q; ++i) {
        if (i >= s.seq_q[b]) {
          EXPECT_EQ(lse[i], -kInf) << "padded row " << i;  // padding wins over the sink
        } else if (i == 4) {
          EXPECT_EQ(lse[i], sigma);  // exactly: log(exp(sigma - sigma)) + sigma
        } else {
          EXPECT_GT(lse[i], sigma);
        }
        if (i >= s.seq_q[b] || i == 4) {
          for (int64_t d = 0; d < s.d_v; ++d) {
            EXPECT_EQ(at(fwd.out.o, s.h_q, s.s_q, s.d_v, b, h, i, d), 0.0);
          }
        }
      }
    }
  }
  // The masked rows carry exp(sigma - lse) = 1 but Delta = dO . O = 0: dsink ignores them.
  const EngineRun bwd = run_ok(c, Direction::backward);
  Tensors naive = bwd.in;
  naive_backward(s, naive);
  EXPECT_EQ(compare_outputs(c, Direction::backward, bwd.out, naive), "");
  for (int64_t b = 0; b < s.b; ++b) {
    for (int64_t h = 0; h < s.h_q; ++h) {
      for (int64_t d = 0; d < s.d_qk; ++d) {
        EXPECT_EQ(at(bwd.out.dq, s.h_q, s.s_q, s.d_qk, b, h, 4, d), 0.0);
      }
    }
  }
}

TEST(ReferenceEdge, ZeroLengthSequences) {
  for (bool sink : {false, true}) {
    Case c = make(sink ? "zero_len_sink" : "zero_len", 3, 2, 2, 4, 5);
    c.spec.seq_q = {0, 4, 2};
    c.spec.seq_kv = {5, 0, 3};
    c.spec.sink = sink;
    c.spec.right = 0, c.spec.bottom_right = true;
    const Spec& s = c.spec;
    const EngineRun fwd = run_ok(c, Direction::forward);
    for (int64_t h = 0; h < s.h_q; ++h) {
      for (int64_t i = 0; i < s.s_q; ++i) {
        EXPECT_EQ(fwd.out.lse[(0 * s.h_q + h) * s.s_q + i], -kInf);  // no queries
        // No keys: every real row is a row with no visible key.
        EXPECT_EQ(fwd.out.lse[(1 * s.h_q + h) * s.s_q + i], sink ? fwd.in.sink[h] : -kInf);
        for (int64_t d = 0; d < s.d_v; ++d) {
          EXPECT_EQ(at(fwd.out.o, s.h_q, s.s_q, s.d_v, 0, h, i, d), 0.0);
          EXPECT_EQ(at(fwd.out.o, s.h_q, s.s_q, s.d_v, 1, h, i, d), 0.0);
        }
      }
    }
    const EngineRun bwd = run_ok(c, Direction::backward);
    for (int64_t h = 0; h < s.h_kv; ++h) {
      for (int64_t j = 0; j < s.s_kv; ++j) {
        for (int64_t d = 0; d < s.d_qk; ++d) {
          for (int64_t b : {0, 1}) {  // batch 0 has no query to see its keys, batch 1 no key
            EXPECT_EQ(at(bwd.out.dk, s.h_kv, s.s_kv, s.d_qk, b, h, j, d), 0.0);
            EXPECT_EQ(at(bwd.out.dv, s.h_kv, s.s_kv, s.d_v, b, h, j, d), 0.0);
          }
        }
      }
    }
    for (double x : bwd.out.dq) EXPECT_TRUE(std::isfinite(x));
    Tensors naive = bwd.in;
    naive_backward(s, naive);
    EXPECT_EQ(compare_outputs(c, Direction::backward, bwd.out, naive), "");
  }
}

TEST(ReferenceEdge, SingleKeyCopiesItsValue) {
  // Skv = 1 and no sink: P = 1, so O is V exactly and stats is the one logit.
  Case c = make("skv1", 2, 4, 2, 5, 1);
  c.spec.bias_b = 1, c.spec.bias_h = 4;
  const Spec& s = c.spec;
  const EngineRun fwd = run_ok(c, Direction::forward);
  for (int64_t b = 0; b < s.b; ++b) {
    for (int64_t h = 0; h < s.h_q; ++h) {
      for (int64_t i = 0; i < s.s_q; ++i) {
        for (int64_t d = 0; d < s.d_v; ++d) {
          EXPECT_EQ(at(fwd.out.o, s.h_q, s.s_q, s.d_v, b, h, i, d),
                    at(fwd.in.v, s.h_kv, s.s_kv, s.d_v, b, h / 2, 0, d));
        }
      }
    }
  }
  // And the backward: dS = P (dP - Delta) = 0 up to rounding of O, so dQ and dbias nearly 0.
  Tensors naive = run_ok(c, Direction::backward).in;
  naive_backward(s, naive);
  EXPECT_EQ(compare_outputs(c, Direction::backward, run_ok(c, Direction::backward).out, naive), "");
}

TEST(ReferenceEdge, SingleQuerySeesEveryKeyBottomRight) {
  // Sq = 1 under bottom-right causal: the query sits on the last key and sees all of them, so
  // the output equals the unmasked one.
  Case masked = make("sq1_causal_br", 2, 2, 1, 1, 9);
  masked.spec.right = 0, masked.spec.bottom_right = true;
  Case open = masked;
  open.spec.right.reset();
  const EngineRun a = run_ok(masked, Direction::forward);
  const EngineRun b = run_ok(open, Direction::forward);
  EXPECT_EQ(a.out.o, b.out.o);
  EXPECT_EQ(a.out.lse, b.out.lse);
  EXPECT_EQ(check_against_naive(masked, Direction::backward), "");
}

TEST(ReferenceEdge, InfiniteBiasMasksLikeTheMask) {
  // Not spelled out by DESIGN: a -inf bias on every key of a row acts as a row with no visible
  // key (O = 0, stats = -inf, zero gradients), never NaN.
  Case c = make("neg_inf_bias", 1, 1, 1, 3, 4);
  c.spec.bias_b = 1, c.spec.bias_h = 1;
  Tensors in = random_inputs(c, Direction::forward);
  for (int64_t j = 0; j < 4; ++j) in.bias[1 * 4 + j] = -kInf;  // row 1
  in.bias[2 * 4 + 3] = -kInf;                                  // one key of row 2
  const EngineRun fwd = run_engine(c, Direction::forward, in);
  ASSERT_TRUE(fwd.status.ok());
  EXPECT_EQ(fwd.out.lse[1], -kInf);
  for (int64_t d = 0; d < c.spec.d_v; ++d) EXPECT_EQ(fwd.out.o[1 * c.spec.d_v + d], 0.0);
  EXPECT_TRUE(std::isfinite(fwd.out.lse[2]));

  // The backward takes the forward's o and stats, -inf included.
  Tensors bin = fwd.in;
  bin.d_o = random_inputs(c, Direction::backward).d_o;
  bin.o = fwd.out.o;
  bin.lse = fwd.out.lse;
  const EngineRun bwd = run_engine(c, Direction::backward, bin);
  ASSERT_TRUE(bwd.status.ok());
  for (const auto* g : {&bwd.out.dq, &bwd.out.dk, &bwd.out.dv, &bwd.out.dbias}) {
    for (double x : *g) EXPECT_TRUE(std::isfinite(x));
  }
  for (int64_t d = 0; d < c.spec.d_qk; ++d) EXPECT_EQ(bwd.out.dq[1 * c.spec.d_qk + d], 0.0);
  for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(bwd.out.dbias[1 * 4 + j], 0.0);
  EXPECT_EQ(bwd.out.dbias[2 * 4 + 3], 0.0);
}

TEST(ReferenceEdge, BitwiseDeterministicAcrossThreadCounts) {
  Case c = make("determinism", 2, 8, 2, 13, 17, 16);
  c.spec.bias_b = 1, c.spec.bias_h = 8;  // dbias sums over batches
  c.spec.sink = true;
  c.spec.softcap = 4.0;
  c.spec.seq_q = {13, 7};
  c.spec.left = 6, c.spec.right = 0, c.spec.bottom_right = true;
  for (Direction dir : {Direction::forward, Direction::backward}) {
    Tensors in = random_inputs(c, dir);
    c.threads = 1;
    const EngineRun first = run_engine(c, dir, in);
    ASSERT_TRUE(first.status.ok());
    for (int threads : {1, 2, 3, 7, 64}) {
      c.threads = threads;
      const EngineRun again = run_engine(c, dir, in);
      ASSERT_TRUE(again.status.ok());
      EXPECT_EQ(again.output_bytes, first.output_bytes) << "threads " << threads;
    }
  }
}

TEST(ReferenceEdge, NothingWrittenOutsideTheOutputs) {
  // Gaps in every dim, non-unit innermost strides, permuted dims; the harness checks the gap
  // and guard bytes of every output and that no input byte changed.
  Case c = make("gaps", 2, 4, 2, 5, 6);
  c.spec.bias_b = 2, c.spec.bias_h = 1, c.spec.sink = true;
  c.spec.seq_q = {5, 0};
  c.spec.seq_kv = {3, 6};
  for (TensorId id : {TensorId::o, TensorId::dq, TensorId::dk, TensorId::dv, TensorId::dbias}) {
    c.layouts[id] = Layout::permuted({2, 0, 3, 1}, 3, 2);
  }
  c.layouts[TensorId::stats] = Layout::permuted({1, 2, 0}, 2, 3);
  c.layouts[TensorId::dsink] = Layout::stepped(4);
  for (Direction dir : {Direction::forward, Direction::backward}) {
    const EngineRun run = run_ok(c, dir);
    EXPECT_FALSE(run.output_bytes.empty());
    Tensors naive = run.in;
    if (dir == Direction::forward) {
      naive_forward(c.spec, naive);
    } else {
      naive_backward(c.spec, naive);
    }
    EXPECT_EQ(compare_outputs(c, dir, run.out, naive), "");
  }
}

TEST(ReferenceEdge, WorkspaceIsNamedAndItsContentsDoNotMatter) {
  Case c = make("workspace", 2, 4, 2, 6, 7);
  c.threads = 3;
  for (Direction dir : {Direction::forward, Direction::backward}) {
    const Problem p = make_problem(c, dir);
    Result<Plan> plan = Plan::build(p, Target::cpu(3), PlanOptions{"reference"});
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_EQ(plan->engine(), "reference");
    ASSERT_FALSE(plan->workspace_chunks().empty());
    for (const WorkspaceChunk& chunk : plan->workspace_chunks()) {
      EXPECT_EQ(chunk.name.rfind("reference.", 0), 0u) << chunk.name;
      EXPECT_EQ(chunk.offset % kWorkspaceAlignment, 0u);
      EXPECT_LE(chunk.offset + chunk.bytes, plan->workspace_bytes());
    }
    // More threads need more per-thread scratch: the size is fixed by the plan.
    Result<Plan> wider = Plan::build(p, Target::cpu(12), PlanOptions{"reference"});
    ASSERT_TRUE(wider.ok());
    EXPECT_GT(wider->workspace_bytes(), plan->workspace_bytes());
  }
  // The harness hands every run a workspace of 0xFF bytes (NaN doubles): scratch read before it
  // is written would show as NaN in the comparison.
  EXPECT_EQ(check_against_naive(c, Direction::backward), "");
}

TEST(ReferenceEdge, DeclinesCudaTargets) {
  const Problem p = Problem::forward({1, 2, 2, 8, 8, 64, 64}, DType::bf16);
  for (int arch : {80, 90}) {
    Result<Plan> plan = Plan::build(p, Target::cuda_arch(arch), PlanOptions{"reference"});
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), Code::not_supported);
    EXPECT_NE(plan.status().message().find("reference: declined: runs on the CPU only"),
              std::string::npos)
        << plan.status().message();
  }
  Result<Plan> cpu = Plan::build(p, Target::cpu(1), PlanOptions{"reference"});
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  EXPECT_EQ(cpu->engine(), "reference");
}

}  // namespace
}  // namespace floe::reftest
