#include "support/reference_harness.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>

#include "common/dtype_convert.h"

namespace floe::reftest {

namespace {

constexpr uint8_t kPoison = 0xFF;

bool is_output(TensorId id, Direction dir) {
  if (dir == Direction::forward) return id == TensorId::o || id == TensorId::stats;
  return id == TensorId::dq || id == TensorId::dk || id == TensorId::dv || id == TensorId::dbias ||
         id == TensorId::dsink;
}

double ulp(DType dtype, double x) {
  const int mantissa = dtype == DType::f16 ? 10 : dtype == DType::bf16 ? 7 : 23;
  const int min_exp = dtype == DType::f16 ? -14 : -126;
  const int e = x == 0 ? min_exp : std::max(std::ilogb(x), min_exp);
  return std::ldexp(1.0, e - mantissa);
}

std::string json_list(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

TensorDesc make_desc(DType dtype, const TensorDesc& logical, const Layout& layout) {
  TensorDesc d = logical;
  d.dtype = dtype;
  std::vector<int> order = layout.order;
  if (static_cast<int>(order.size()) != d.rank) {
    order.resize(static_cast<size_t>(d.rank));
    std::iota(order.begin(), order.end(), 0);
  }
  int64_t stride = layout.inner;
  for (int n = d.rank - 1; n >= 0; --n) {
    const int dim = order[static_cast<size_t>(n)];
    if (dim == layout.zero_dim) {
      d.strides[dim] = 0;
      continue;
    }
    d.strides[dim] = stride;
    stride = stride * d.dims[dim] + layout.gap;
  }
  return d;
}

HostTensor::HostTensor(const TensorDesc& desc)
    : desc_(desc), bytes_(desc.span_bytes() + 2 * kGuard, kPoison) {}

template <class Fn>
void HostTensor::for_each_offset(Fn fn) const {
  int64_t idx[TensorDesc::kMaxRank] = {0, 0, 0, 0};
  const int64_t n = desc_.numel();
  for (int64_t e = 0; e < n; ++e) {
    int64_t off = 0;
    for (int r = 0; r < desc_.rank; ++r) off += idx[r] * desc_.strides[r];
    fn(e, off);
    for (int r = desc_.rank - 1; r >= 0; --r) {  // the next index in C order
      if (++idx[r] < desc_.dims[r]) break;
      idx[r] = 0;
    }
  }
}

void HostTensor::write(const std::vector<double>& logical) {
  for_each_offset([&](int64_t e, int64_t off) {
    detail::store_from_float(data(), off, desc_.dtype, static_cast<float>(logical[e]));
  });
}

std::vector<double> HostTensor::read() const {
  std::vector<double> out(static_cast<size_t>(desc_.numel()));
  const void* base = bytes_.data() + kGuard;
  for_each_offset(
      [&](int64_t e, int64_t off) { out[e] = detail::load_as_float(base, off, desc_.dtype); });
  return out;
}

std::string HostTensor::untouched_outside() const {
  std::vector<bool> element(bytes_.size(), false);
  const size_t width = size_of(desc_.dtype);
  for_each_offset([&](int64_t, int64_t off) {
    for (size_t k = 0; k < width; ++k) element[kGuard + off * width + k] = true;
  });
  for (size_t i = 0; i < bytes_.size(); ++i) {
    if (!element[i] && bytes_[i] != kPoison) {
      const int64_t rel = static_cast<int64_t>(i) - static_cast<int64_t>(kGuard);
      return "byte " + std::to_string(rel) + " (relative to the base) outside the elements";
    }
  }
  return "";
}

HostWorkspace::HostWorkspace(size_t bytes)
    : bytes_(bytes + kWorkspaceAlignment, kPoison), size_(bytes) {
  const auto addr = reinterpret_cast<uintptr_t>(bytes_.data());
  const uintptr_t aligned =
      (addr + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
  base_ = bytes_.data() + (aligned - addr);
}

std::string Case::describe(Direction dir) const {
  const Problem p = make_problem(*this, dir);
  std::ostringstream js;
  js.precision(17);
  const Spec& s = spec;
  js << "{\"op\": \"" << (dir == Direction::forward ? "fwd" : "bwd") << "\", \"dtype\": \""
     << to_string(dtype) << "\", \"b\": " << s.b << ", \"h_q\": " << s.h_q
     << ", \"h_kv\": " << s.h_kv << ", \"s_q\": " << s.s_q << ", \"s_kv\": " << s.s_kv
     << ", \"d_qk\": " << s.d_qk << ", \"d_v\": " << s.d_v << ", \"strides\": {";
  bool first = true;
  for (int i = 0; i < kTensorCount; ++i) {
    const auto id = static_cast<TensorId>(i);
    if (!p.has(id) || !layouts.count(id)) continue;
    const TensorDesc& d = *p.tensor(id);
    js << (first ? "" : ", ") << "\"" << to_string(id) << "\": [";
    for (int r = 0; r < d.rank; ++r) js << (r ? ", " : "") << d.strides[r];
    js << "]";
    first = false;
  }
  js << "}";
  if (s.scale) js << ", \"scale\": " << *s.scale;
  if (s.softcap) js << ", \"softcap\": " << *s.softcap;
  if (s.left || s.right) {
    js << ", \"mask\": {\"align\": \"" << (s.bottom_right ? "bottom_right" : "top_left")
       << "\", \"left\": " << (s.left ? std::to_string(*s.left) : "null")
       << ", \"right\": " << (s.right ? std::to_string(*s.right) : "null") << "}";
  }
  if (!s.seq_q.empty()) js << ", \"seq_len_q\": " << json_list(s.seq_q);
  if (!s.seq_kv.empty()) js << ", \"seq_len_kv\": " << json_list(s.seq_kv);
  if (s.has_bias()) js << ", \"bias\": [" << s.bias_b << ", " << s.bias_h << "]";
  if (s.sink) js << ", \"sink\": true";
  if (dir == Direction::forward) js << ", \"stats\": " << (stats ? "true" : "false");
  js << "}  (case '" << name << "', seed " << seed << ", threads " << threads;
  if (lse_shift != 0) js << ", stats shifted by " << lse_shift;
  js << ")";
  return js.str();
}

Problem make_problem(const Case& c, Direction dir) {
  const Spec& s = c.spec;
  const Shape shape{s.b, s.h_q, s.h_kv, s.s_q, s.s_kv, s.d_qk, s.d_v};
  Problem p = dir == Direction::forward ? Problem::forward(shape, c.dtype)
                                        : Problem::backward(shape, c.dtype);
  if (dir == Direction::forward) p.set_stats(c.stats);
  if (s.has_bias()) {
    p.set_bias(s.bias_b, s.bias_h);
    if (dir == Direction::backward) p.set_bias_grad(c.bias_grad);
  }
  p.set_sink(s.sink);
  p.set_seq_len_q(!s.seq_q.empty());
  p.set_seq_len_kv(!s.seq_kv.empty());
  if (s.scale) p.set_scale(*s.scale);
  if (s.softcap) p.set_softcap(*s.softcap);
  if (s.left || s.right) {
    p.set_mask(
        Mask{s.bottom_right ? MaskAlign::bottom_right : MaskAlign::top_left, s.left, s.right});
  }
  for (const auto& [id, layout] : c.layouts) {
    if (p.has(id)) p.set_tensor(id, make_desc(p.tensor(id)->dtype, *p.tensor(id), layout));
  }
  return p;
}

Tensors random_inputs(const Case& c, Direction dir) {
  Tensors t;
  size_tensors(c.spec, t);
  std::mt19937_64 rng(c.seed);
  auto fill = [&](std::vector<double>& v, double lo, double hi) {
    std::uniform_real_distribution<double> u(lo, hi);
    for (double& x : v) x = u(rng);
  };
  // Wide enough for peaked rows (so that a wrong key shows), centred so that outputs cancel.
  fill(t.q, -2, 2);
  fill(t.k, -2, 2);
  fill(t.v, -1, 1);
  fill(t.bias, -2, 2);
  fill(t.sink, -1, 2);
  if (dir == Direction::backward) {
    fill(t.d_o, -1, 1);
  } else {
    t.d_o.clear();
  }
  t.o.clear();  // the backward's o and lse come from the naive forward (see run_engine)
  t.lse.clear();
  return t;
}

EngineRun run_engine(const Case& c, Direction dir) {
  return run_engine(c, dir, random_inputs(c, dir));
}

EngineRun run_engine(const Case& c, Direction dir, const Tensors& inputs) {
  const Problem problem = make_problem(c, dir);
  EngineRun run;
  run.in = inputs;
  std::map<TensorId, HostTensor> buf;
  Arguments args;
  for (int i = 0; i < kTensorCount; ++i) {
    const auto id = static_cast<TensorId>(i);
    if (!problem.has(id)) continue;
    buf.emplace(id, HostTensor(*problem.tensor(id)));
    args.set(id, buf.at(id).data());
  }
  // Each input is written, then read back as the engine will see it.
  auto put = [&](TensorId id, std::vector<double>& v) {
    if (!problem.has(id)) return;
    buf.at(id).write(v);
    v = buf.at(id).read();
  };
  Tensors& in = run.in;
  std::vector<double> seq_q(c.spec.seq_q.begin(), c.spec.seq_q.end());
  std::vector<double> seq_kv(c.spec.seq_kv.begin(), c.spec.seq_kv.end());
  put(TensorId::q, in.q);
  put(TensorId::k, in.k);
  put(TensorId::v, in.v);
  put(TensorId::bias, in.bias);
  put(TensorId::sink, in.sink);
  put(TensorId::seq_len_q, seq_q);
  put(TensorId::seq_len_kv, seq_kv);
  if (dir == Direction::backward) {
    if (in.o.empty()) {
      Tensors fwd = in;
      naive_forward(c.spec, fwd);
      in.o = fwd.o;
      in.lse = fwd.lse;
      for (double& x : in.lse) x += c.lse_shift;
    }
    put(TensorId::o, in.o);
    put(TensorId::stats, in.lse);
    put(TensorId::d_o, in.d_o);
  }

  std::map<TensorId, std::vector<uint8_t>> inputs_before;
  for (const auto& [id, t] : buf) {
    if (!is_output(id, dir)) inputs_before[id] = t.snapshot();
  }
  Result<Plan> plan = Plan::build(problem, Target::cpu(c.threads), PlanOptions{"reference"});
  if (!plan) {
    run.status = plan.status();
    return run;
  }
  HostWorkspace ws(plan->workspace_bytes());
  run.status = plan->execute(args, ws.data(), ws.size());
  if (!run.status.ok()) return run;

  for (const auto& [id, t] : buf) {
    const std::string name = std::string("tensor '") + to_string(id) + "': ";
    if (!is_output(id, dir)) {
      if (!t.same_as(inputs_before[id])) run.damage.push_back(name + "an input was written");
      continue;
    }
    if (std::string e = t.untouched_outside(); !e.empty()) run.damage.push_back(name + e);
    run.output_bytes[id] = t.snapshot();
  }
  auto get = [&](TensorId id, std::vector<double>& v) {
    if (problem.has(id) && is_output(id, dir)) v = buf.at(id).read();
  };
  get(TensorId::o, run.out.o);
  get(TensorId::stats, run.out.lse);
  get(TensorId::dq, run.out.dq);
  get(TensorId::dk, run.out.dk);
  get(TensorId::dv, run.out.dv);
  get(TensorId::dbias, run.out.dbias);
  get(TensorId::dsink, run.out.dsink);
  return run;
}

std::string compare(const char* name, const std::vector<double>& engine,
                    const std::vector<double>& want, DType dtype) {
  if (engine.size() != want.size()) {
    return std::string(name) + ": " + std::to_string(engine.size()) + " elements, want " +
           std::to_string(want.size()) + "\n";
  }
  std::ostringstream msg;
  msg.precision(9);
  int bad = 0;
  for (size_t e = 0; e < engine.size(); ++e) {
    const double a = detail::round_to(dtype, static_cast<float>(engine[e]));
    const double b = detail::round_to(dtype, static_cast<float>(want[e]));
    bool ok = a == b;
    if (!ok && std::isfinite(a) && std::isfinite(b)) {
      ok = std::fabs(a - b) <= ulp(dtype, std::max(std::fabs(a), std::fabs(b))) + 1e-12;
    }
    if (!ok && ++bad <= 5) {
      msg << "  " << name << "[" << e << "]: engine " << a << ", want " << b << "\n";
    }
  }
  if (bad > 5) msg << "  " << name << ": " << bad << " elements differ in all\n";
  return msg.str();
}

std::string compare_outputs(const Case& c, Direction dir, const Tensors& engine,
                            const Tensors& naive) {
  std::string err;
  if (dir == Direction::forward) {
    err += compare("o", engine.o, naive.o, c.dtype);
    if (c.stats) err += compare("stats", engine.lse, naive.lse, DType::f32);
  } else {
    err += compare("dq", engine.dq, naive.dq, c.dtype);
    err += compare("dk", engine.dk, naive.dk, c.dtype);
    err += compare("dv", engine.dv, naive.dv, c.dtype);
    if (c.spec.has_bias() && c.bias_grad) {
      err += compare("dbias", engine.dbias, naive.dbias, c.dtype);
    }
    if (c.spec.sink) err += compare("dsink", engine.dsink, naive.dsink, DType::f32);
  }
  return err.empty() ? err : c.describe(dir) + "\n" + err;
}

std::string check_against_naive(const Case& c, Direction dir) {
  const EngineRun run = run_engine(c, dir);
  if (!run.status.ok()) return c.describe(dir) + "\n  engine failed: " + run.status.message();
  Tensors naive = run.in;
  if (dir == Direction::forward) {
    naive_forward(c.spec, naive);
  } else {
    naive_backward(c.spec, naive);
  }
  std::string err;
  for (const std::string& d : run.damage) err += "  " + d + "\n";
  if (!err.empty()) err = c.describe(dir) + "\n" + err;
  const std::string values = compare_outputs(c, dir, run.out, naive);
  return err.empty() ? values : err + values.substr(values.find('\n') + 1);
}

}  // namespace floe::reftest
