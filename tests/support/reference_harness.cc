#include "support/reference_harness.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>

#include "buffers.h"
#include "common/dtype_convert.h"
#include "guarded_block.h"

namespace floe::reftest {

namespace {

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

// A logical fp64 array as the float32 array TensorBuffers uploads. Along a zero-stride dim
// every index addresses one element, which TensorBuffers accepts only when the values agree:
// each takes the value at the dim's last index (what a plain strided write would leave).
tool::HostArray to_array(const TensorDesc& d, const std::vector<double>& logical) {
  tool::HostArray a;
  a.shape.assign(d.dims.begin(), d.dims.begin() + d.rank);
  a.data.resize(logical.size());
  int64_t idx[TensorDesc::kMaxRank] = {0, 0, 0, 0};
  for (size_t e = 0; e < logical.size(); ++e) {
    int64_t src = 0;
    for (int r = 0; r < d.rank; ++r) {
      src = src * d.dims[r] + (d.strides[r] == 0 ? d.dims[r] - 1 : idx[r]);
    }
    a.data[e] = static_cast<float>(logical[static_cast<size_t>(src)]);
    for (int r = d.rank - 1; r >= 0; --r) {  // the next index in C order
      if (++idx[r] < d.dims[r]) break;
      idx[r] = 0;
    }
  }
  return a;
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
    if (!p.has(id) || (!layouts.count(id) && !problem)) continue;
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
  if (c.problem) return *c.problem;
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
  Result<tool::TensorBuffers> bufs = tool::TensorBuffers::create(problem, tool::Memory::host);
  if (!bufs) {
    run.status = bufs.status();
    return run;
  }
  // Each input is uploaded, then read back as the engine will see it.
  auto put = [&](TensorId id, std::vector<double>& v) {
    if (!problem.has(id) || !run.status.ok()) return;
    const TensorDesc& d = *problem.tensor(id);
    run.status = bufs->upload(id, to_array(d, v));
    if (!run.status.ok()) return;
    Result<tool::HostArray> back = bufs->download(id);
    if (!back) {
      run.status = back.status();
      return;
    }
    v.assign(back->data.begin(), back->data.end());
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
  if (run.status.ok()) run.status = bufs->poison_outputs();
  if (!run.status.ok()) return run;

  Result<Plan> plan = Plan::build(problem, Target::cpu(c.threads), PlanOptions{"reference"});
  if (!plan) {
    run.status = plan.status();
    return run;
  }
  Result<tool::GuardedBlock> ws =
      tool::GuardedBlock::create(plan->workspace_bytes(), tool::Memory::host, "workspace");
  if (!ws) {
    run.status = ws.status();
    return run;
  }
  if (Status st = ws->fill_payload(0xFF); !st) {  // an engine must not assume it clean
    run.status = st;
    return run;
  }
  run.status = plan->execute(bufs->arguments(), ws->payload(), plan->workspace_bytes());
  if (!run.status.ok()) return run;

  if (Status st = bufs->check_guards(); !st) run.damage.push_back(st.message());
  if (Status st = ws->check_canaries(); !st) run.damage.push_back(st.message());
  auto get = [&](TensorId id, std::vector<double>& v) {
    if (!problem.has(id) || !is_output(id, dir)) return;
    Result<tool::HostArray> out = bufs->download(id);
    if (!out) {
      run.damage.push_back(out.status().message());
      return;
    }
    v.assign(out->data.begin(), out->data.end());
    std::vector<uint8_t>& bits = run.output_bytes[id];
    bits.resize(out->data.size() * sizeof(float));
    std::memcpy(bits.data(), out->data.data(), bits.size());
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

Result<ReferenceInputs> case_from_generated(const tool::Case& g, const std::string& name) {
  const Problem& p = g.problem;
  ReferenceInputs r;
  r.dir = p.direction();
  Case& c = r.c;
  c.name = name;
  c.problem = p;
  c.threads = 1;
  const TensorDesc& q = *p.tensor(TensorId::q);
  const TensorDesc& k = *p.tensor(TensorId::k);
  const TensorDesc& v = *p.tensor(TensorId::v);
  c.dtype = q.dtype;
  Spec& s = c.spec;
  s.b = q.dims[0], s.h_q = q.dims[1], s.s_q = q.dims[2], s.d_qk = q.dims[3];
  s.h_kv = k.dims[1], s.s_kv = k.dims[2], s.d_v = v.dims[3];
  s.scale = p.scale();
  s.softcap = p.softcap();
  s.left = p.mask().left;
  s.right = p.mask().right;
  s.bottom_right = p.mask().align == MaskAlign::bottom_right;
  if (p.has(TensorId::bias)) {
    s.bias_b = p.tensor(TensorId::bias)->dims[0];
    s.bias_h = p.tensor(TensorId::bias)->dims[1];
  }
  s.sink = p.has(TensorId::sink);
  c.stats = p.has(TensorId::stats);
  c.bias_grad = p.has(TensorId::dbias);
  auto take = [&](const char* key, std::vector<double>& out) -> Status {
    const auto it = g.inputs.find(key);
    if (it == g.inputs.end()) {
      return Status(Code::invalid_argument, std::string("generated case: no input '") + key + "'");
    }
    out.assign(it->second.data.begin(), it->second.data.end());
    return Status();
  };
  std::vector<std::string> keys = {"q", "k", "v"};
  if (s.has_bias()) keys.push_back("bias");
  if (s.sink) keys.push_back("sink");
  if (r.dir == Direction::backward) keys.insert(keys.end(), {"o", "stats", "do"});
  Tensors& t = r.inputs;
  for (const std::string& key : keys) {
    std::vector<double>* dst = key == "q"      ? &t.q
                               : key == "k"    ? &t.k
                               : key == "v"    ? &t.v
                               : key == "bias" ? &t.bias
                               : key == "sink" ? &t.sink
                               : key == "o"    ? &t.o
                               : key == "do"   ? &t.d_o
                                               : &t.lse;
    if (Status st = take(key.c_str(), *dst); !st) return st;
  }
  for (const char* key : {"seq_len_q", "seq_len_kv"}) {
    if (!p.has(tool::tensor_of(key))) continue;
    std::vector<double> lens;
    if (Status st = take(key, lens); !st) return st;
    std::vector<int>& dst = std::string(key) == "seq_len_q" ? s.seq_q : s.seq_kv;
    for (double x : lens) dst.push_back(static_cast<int>(x));
  }
  size_tensors(s, t);  // the outputs' slots; inputs keep their values
  if (r.dir == Direction::forward) {
    t.o.clear();
    t.lse.clear();
    t.d_o.clear();
  }
  return r;
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
