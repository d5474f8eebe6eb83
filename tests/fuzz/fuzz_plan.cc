// libFuzzer target: Plan::build over random problems (every declaration a Problem can make,
// sizes from tiny to the 64-bit edge, any strides, masks, scales and softcaps including NaN
// and infinities) on the CPU and both GPU architectures; a small valid problem also runs on
// the reference engine through the case library's guarded buffers (canaries, poisoned gaps).
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include "case_folder.h"
#include "floe/floe.h"

using namespace floe;
using namespace floe::tool;

namespace {

// Mostly small sizes, sometimes the edges: 0, negative, 2^31 - 1, 2^62.
int64_t size_value(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 0:
      return 0;
    case 1:
      return -in.ConsumeIntegralInRange<int64_t>(1, 4);
    case 2:
      return (int64_t{1} << 31) - 1;
    case 3:
      return in.ConsumeIntegral<int64_t>();
    default:
      return in.ConsumeIntegralInRange<int64_t>(1, 9);
  }
}

double real_value(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      return std::numeric_limits<double>::quiet_NaN();
    case 1:
      return std::numeric_limits<double>::infinity();
    case 2:
      return -in.ConsumeFloatingPoint<double>();
    default:
      return in.ConsumeFloatingPointInRange<double>(0.01, 10.0);
  }
}

std::optional<int64_t> side(FuzzedDataProvider& in) {
  if (in.ConsumeBool()) return std::nullopt;
  return in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(-3, 12)
                          : in.ConsumeIntegral<int64_t>();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Shape sh;
  sh.b = size_value(in);
  sh.h_q = size_value(in);
  sh.h_kv = size_value(in);
  sh.s_q = size_value(in);
  sh.s_kv = size_value(in);
  sh.d_qk =
      in.ConsumeBool() ? int64_t{8} * in.ConsumeIntegralInRange<int64_t>(1, 4) : size_value(in);
  sh.d_v = in.ConsumeBool() ? sh.d_qk : size_value(in);
  // Sizes go to the library as they come: its own checks (element counts, spans and workspace
  // bytes in 64 bits) must refuse what does not fit, naming the tensor, with no signed overflow
  // on the way (UBSan). FLOE_FUZZ_TOOL_SIZES=1 refuses such sizes first, as the case library
  // does (shape_fits), to fuzz what lies behind them.
  static const bool raw_sizes = std::getenv("FLOE_FUZZ_TOOL_SIZES") == nullptr;
  if (!raw_sizes && !shape_fits(sh)) return 0;
  const DType dtype = in.ConsumeBool() ? DType::bf16 : DType::f16;
  const bool backward = in.ConsumeBool();
  Problem p = backward ? Problem::backward(sh, dtype) : Problem::forward(sh, dtype);
  if (in.ConsumeBool()) p.set_stats(in.ConsumeBool());
  if (in.ConsumeBool()) {
    const int64_t bias_b = in.ConsumeBool() ? 1 : size_value(in);
    const int64_t bias_h = in.ConsumeBool() ? 1 : size_value(in);
    if (!raw_sizes && !shape_fits(sh, bias_b, bias_h)) return 0;
    p.set_bias(bias_b, bias_h);
    if (backward && in.ConsumeBool()) p.set_bias_grad(false);
  }
  if (in.ConsumeBool()) p.set_sink();
  if (in.ConsumeBool()) p.set_seq_len_q();
  if (in.ConsumeBool()) p.set_seq_len_kv();
  if (in.ConsumeBool()) p.set_scale(real_value(in));
  if (in.ConsumeBool()) p.set_softcap(real_value(in));
  if (in.ConsumeBool()) {
    Mask m;
    m.align = in.ConsumeBool() ? MaskAlign::top_left : MaskAlign::bottom_right;
    m.left = side(in);
    m.right = side(in);
    p.set_mask(m);
  }
  if (in.ConsumeBool()) p.set_deterministic();
  // Strides for some tensors: permutations of the packed ones, padding, zeros, anything.
  const int n_strided = in.ConsumeIntegralInRange<int>(0, 4);
  for (int k = 0; k < n_strided; ++k) {
    const auto id = static_cast<TensorId>(in.ConsumeIntegralInRange<int>(0, kTensorCount - 1));
    if (!p.has(id)) continue;
    TensorDesc d = *p.tensor(id);
    for (int r = 0; r < d.rank; ++r) {
      d.strides[r] = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(0, 300)
                                      : in.ConsumeIntegral<int64_t>();
    }
    p.set_tensor(id, d);
  }

  if (!check_spans(p)) return 0;
  bool cpu_ok = false;
  for (const Target& t : {Target::cpu(), Target::cuda_arch(80), Target::cuda_arch(90)}) {
    Result<Plan> plan = Plan::build(p, t);
    if (!plan) continue;
    (void)plan->explain();
    (void)plan->workspace_bytes();
    cpu_ok |= t.kind == Target::Kind::cpu;
  }
  if (!cpu_ok) return 0;

  // Small enough to run: the reference engine through the guarded buffers.
  int64_t elements = 0;
  for (int i = 0; i < kTensorCount; ++i) {
    const auto id = static_cast<TensorId>(i);
    if (!p.has(id)) continue;
    size_t bytes = 0;
    if (!span_bytes_checked(id, *p.tensor(id), &bytes) || bytes > (1u << 16)) return 0;
    elements += p.tensor(id)->numel();
  }
  if (elements > (1 << 14)) return 0;
  Case c;
  c.problem = p;
  for (const std::string& name : input_names(p)) {
    const TensorDesc& d = *p.tensor(tensor_of(name));
    HostArray a;
    a.shape.assign(d.dims.begin(), d.dims.begin() + d.rank);
    a.data.resize(static_cast<size_t>(d.numel()));
    const bool lens = name == "seq_len_q" || name == "seq_len_kv";
    const int64_t limit = name == "seq_len_q" ? sh.s_q : sh.s_kv;
    for (float& x : a.data) {
      x = lens ? static_cast<float>(in.ConsumeIntegralInRange<int64_t>(0, limit))
               : in.ConsumeFloatingPointInRange<float>(-4.f, 4.f);
    }
    // Zero strides make several indices one element: their values must agree.
    bool broadcast = false;
    for (int r = 0; r < d.rank; ++r) broadcast |= d.strides[r] == 0;
    if (broadcast && !lens) std::fill(a.data.begin(), a.data.end(), 0.5f);
    c.inputs[name] = std::move(a);
  }
  Result<RunResult> r = run_case(c, "reference", Memory::host);
  // A refusal is fine (an output overlapping another, say); damage outside the outputs or
  // a canary hit is not: run_case reports those as Code::internal.
  if (!r && r.status().code() == Code::internal) __builtin_trap();
  return 0;
}
