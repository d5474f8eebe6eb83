// Execute refuses bad arguments before any work: a missing pointer, a pointer for a tensor the
// plan does not declare, a null, undersized or misaligned workspace. Each error names the
// culprit, and no output byte is written.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "common/dtype_convert.h"
#include "floe/floe.h"

namespace floe {
namespace {

// Host buffers for every declared tensor, inputs random, outputs filled with 0xA5 bytes.
struct HostTensors {
  explicit HostTensors(const Problem& p) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (int i = 0; i < kTensorCount; ++i) {
      const auto id = static_cast<TensorId>(i);
      if (!p.has(id)) continue;
      const TensorDesc& d = *p.tensor(id);
      auto& buf = bytes[i];
      buf.assign(d.span_bytes() + 64, static_cast<char>(0xA5));
      const int64_t n = d.span();
      for (int64_t e = 0; e < n; ++e) {
        if (id == TensorId::seq_len_q || id == TensorId::seq_len_kv) {
          const int32_t len = 3;
          std::memcpy(buf.data() + 4 * e, &len, 4);
        } else if (!is_output(p, id)) {
          detail::store_from_float(buf.data(), e, d.dtype, u(rng));
        }
      }
      args.set(id, buf.data());
    }
  }
  static bool is_output(const Problem& p, TensorId id) {
    if (p.direction() == Direction::forward) return id == TensorId::o || id == TensorId::stats;
    return id == TensorId::dq || id == TensorId::dk || id == TensorId::dv ||
           id == TensorId::dbias || id == TensorId::dsink;
  }
  bool outputs_untouched(const Problem& p) const {
    for (int i = 0; i < kTensorCount; ++i) {
      if (!p.has(static_cast<TensorId>(i)) || !is_output(p, static_cast<TensorId>(i))) continue;
      for (char c : bytes.at(i)) {
        if (c != static_cast<char>(0xA5)) return false;
      }
    }
    return true;
  }
  std::map<int, std::vector<char>> bytes;
  Arguments args;
};

struct Workspace {
  explicit Workspace(size_t n) : storage(new (std::align_val_t(256)) char[n + 512]) {}
  ~Workspace() { operator delete[](storage, std::align_val_t(256)); }
  char* storage;
};

Problem backward_problem() {
  return Problem::backward(Shape{2, 4, 2, 9, 11, 16, 8}, DType::bf16)
      .set_bias(1, 4)
      .set_sink()
      .set_seq_len_kv();
}

struct BadCall {
  const char* name;
  std::function<Status(const Plan&, HostTensors&, char* ws)> call;
  Code code;
  std::vector<std::string> culprit;
};

TEST(ExecuteChecks, BadArgumentsAreRefusedAndNothingIsWritten) {
  const Problem problem = backward_problem();
  auto built = Plan::build(problem, Target::cpu(2));
  ASSERT_TRUE(built.ok()) << built.status().message();
  const Plan& plan = *built;
  const size_t need = plan.workspace_bytes();
  ASSERT_GT(need, 0u) << "the reference backward keeps its fp64 accumulators in the workspace";

  const std::vector<BadCall> calls = {
      {"missing q",
       [](const Plan& p, HostTensors& t, char* ws) {
         Arguments a = t.args;
         a.set(TensorId::q, nullptr);
         return p.execute(a, ws, p.workspace_bytes());
       },
       Code::invalid_argument,
       {"'q'", "null"}},
      {"missing dbias",
       [](const Plan& p, HostTensors& t, char* ws) {
         Arguments a = t.args;
         a.set(TensorId::dbias, nullptr);
         return p.execute(a, ws, p.workspace_bytes());
       },
       Code::invalid_argument,
       {"'dbias'", "null"}},
      {"missing seq_len_kv",
       [](const Plan& p, HostTensors& t, char* ws) {
         Arguments a = t.args;
         a.set(TensorId::seq_len_kv, nullptr);
         return p.execute(a, ws, p.workspace_bytes());
       },
       Code::invalid_argument,
       {"'seq_len_kv'", "null"}},
      {"undeclared seq_len_q",
       [](const Plan& p, HostTensors& t, char* ws) {
         Arguments a = t.args;
         a.set(TensorId::seq_len_q, t.args.get(TensorId::seq_len_kv));
         return p.execute(a, ws, p.workspace_bytes());
       },
       Code::invalid_argument,
       {"'seq_len_q'", "does not declare"}},
      {"misaligned k",
       [](const Plan& p, HostTensors& t, char* ws) {
         Arguments a = t.args;
         a.set(TensorId::k, static_cast<char*>(t.args.get(TensorId::k)) + 1);
         return p.execute(a, ws, p.workspace_bytes());
       },
       Code::invalid_argument,
       {"'k'", "aligned"}},
      // Aliasing (issue 11 item 5): refused before any work, on exact byte ranges.
      {"dk and dv on the same memory",
       [](const Plan& p, HostTensors& t, char* ws) {
         Arguments a = t.args;
         a.set(TensorId::dv, t.args.get(TensorId::dk));
         return p.execute(a, ws, p.workspace_bytes());
       },
       Code::invalid_argument,
       {"'dk'", "overlaps", "output 'dv'"}},
      {"dv starting inside dk's last row",
       [](const Plan& p, HostTensors& t, char* ws) {
         Arguments a = t.args;
         const size_t dk_bytes = p.problem().tensor(TensorId::dk)->span_bytes();
         a.set(TensorId::dv, static_cast<char*>(t.args.get(TensorId::dk)) + dk_bytes - 2);
         return p.execute(a, ws, p.workspace_bytes());
       },
       Code::invalid_argument,
       {"'dk'", "overlaps", "'dv'"}},
      {"dq on q",
       [](const Plan& p, HostTensors& t, char* ws) {
         Arguments a = t.args;
         a.set(TensorId::dq, t.args.get(TensorId::q));
         return p.execute(a, ws, p.workspace_bytes());
       },
       Code::invalid_argument,
       {"'dq'", "overlaps", "input 'q'"}},
      {"dsink inside do",
       [](const Plan& p, HostTensors& t, char* ws) {
         Arguments a = t.args;
         a.set(TensorId::dsink, static_cast<char*>(t.args.get(TensorId::d_o)) + 64);
         return p.execute(a, ws, p.workspace_bytes());
       },
       Code::invalid_argument,
       {"'dsink'", "overlaps", "input 'do'"}},
      {"dbias over seq_len_kv",
       [](const Plan& p, HostTensors& t, char* ws) {
         Arguments a = t.args;
         a.set(TensorId::seq_len_kv, t.args.get(TensorId::dbias));
         return p.execute(a, ws, p.workspace_bytes());
       },
       Code::invalid_argument,
       {"'dbias'", "overlaps", "input 'seq_len_kv'"}},
      {"dv that wraps past 2^64",
       [](const Plan& p, HostTensors& t, char* ws) {
         // Its bytes would run from 2^64 - 256 over the top and alias address 0 onwards:
         // refused without being touched.
         Arguments a = t.args;
         a.set(TensorId::dv, reinterpret_cast<void*>(~uintptr_t{0} - 255));
         return p.execute(a, ws, p.workspace_bytes());
       },
       Code::invalid_argument,
       {"'dv'", "address space"}},
      {"null workspace",
       [](const Plan& p, HostTensors& t, char*) {
         return p.execute(t.args, nullptr, p.workspace_bytes());
       },
       Code::workspace,
       {"workspace", "null", "needs"}},
      {"undersized workspace",
       [](const Plan& p, HostTensors& t, char* ws) {
         return p.execute(t.args, ws, p.workspace_bytes() - 1);
       },
       Code::workspace,
       {"workspace", std::to_string(need)}},
      {"misaligned workspace",
       [](const Plan& p, HostTensors& t, char* ws) {
         return p.execute(t.args, ws + 16, p.workspace_bytes());
       },
       Code::workspace,
       {"workspace", "aligned to 256"}},
  };
  for (const BadCall& bad : calls) {
    SCOPED_TRACE(bad.name);
    HostTensors t(problem);
    Workspace ws(need);
    const Status st = bad.call(plan, t, ws.storage);
    EXPECT_EQ(st.code(), bad.code) << st.message();
    for (const std::string& fragment : bad.culprit) {
      EXPECT_NE(st.message().find(fragment), std::string::npos) << st.message();
    }
    EXPECT_TRUE(t.outputs_untouched(problem));
  }

  // The same buffers with correct arguments do get written: the checks above can fail.
  HostTensors t(problem);
  Workspace ws(need);
  const Status ok = plan.execute(t.args, ws.storage, need);
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_FALSE(t.outputs_untouched(problem));
}

// Outputs that only touch (dv right after dk's last byte) and inputs that overlap each other
// (q, k and v in one buffer) are fine; so is the forward's o beside stats.
TEST(ExecuteChecks, AdjacentOutputsAndSharedInputsAreAccepted) {
  const Problem problem = Problem::backward(Shape{1, 2, 2, 4, 4, 8, 8}, DType::bf16);
  auto plan = Plan::build(problem, Target::cpu(1));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  HostTensors t(problem);
  const size_t dk_bytes = problem.tensor(TensorId::dk)->span_bytes();
  std::vector<char> dkdv(dk_bytes + problem.tensor(TensorId::dv)->span_bytes());
  Arguments a = t.args;
  a.set(TensorId::dk, dkdv.data()).set(TensorId::dv, dkdv.data() + dk_bytes);
  a.set(TensorId::k, t.args.get(TensorId::q)).set(TensorId::v, t.args.get(TensorId::q));
  Workspace ws(plan->workspace_bytes());
  const Status st = plan->execute(a, ws.storage, plan->workspace_bytes());
  EXPECT_TRUE(st.ok()) << st.message();

  // One byte less apart and they overlap.
  a.set(TensorId::dv, dkdv.data() + dk_bytes - 1);
  const Status bad = plan->execute(a, ws.storage, plan->workspace_bytes());
  EXPECT_EQ(bad.code(), Code::invalid_argument) << bad.message();
}

// Forward: o over stats, and o over k.
TEST(ExecuteChecks, ForwardOutputsMustNotOverlap) {
  const Problem problem = Problem::forward(Shape{1, 2, 2, 4, 4, 8, 8}, DType::bf16).set_stats();
  auto plan = Plan::build(problem, Target::cpu(1));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  HostTensors t(problem);
  Workspace ws(plan->workspace_bytes());
  Arguments a = t.args;
  a.set(TensorId::stats, t.args.get(TensorId::o));
  Status st = plan->execute(a, ws.storage, plan->workspace_bytes());
  EXPECT_EQ(st.code(), Code::invalid_argument);
  EXPECT_NE(st.message().find("'o'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("'stats'"), std::string::npos) << st.message();
  a = t.args;
  a.set(TensorId::o, t.args.get(TensorId::k));
  st = plan->execute(a, ws.storage, plan->workspace_bytes());
  EXPECT_EQ(st.code(), Code::invalid_argument);
  EXPECT_NE(st.message().find("input 'k'"), std::string::npos) << st.message();
  EXPECT_TRUE(t.outputs_untouched(problem));
}

}  // namespace
}  // namespace floe
