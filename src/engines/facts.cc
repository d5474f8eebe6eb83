#include "engines/facts.h"

#include <cmath>

namespace floe::detail {

Facts make_facts(const Problem& problem) {
  Facts f;
  f.direction = problem.direction();
  f.dtype = problem.dtype();
  for (int i = 0; i < kTensorCount; ++i) {
    const auto& desc = problem.tensor(static_cast<TensorId>(i));
    f.declared[i] = desc.has_value();
    if (desc) f.tensor[i] = *desc;
  }
  const TensorDesc& q = f.t(TensorId::q);
  const TensorDesc& k = f.t(TensorId::k);
  const TensorDesc& v = f.t(TensorId::v);
  f.ragged_q = problem.ragged_q().has_value();
  f.paged_kv = problem.paged_kv().has_value();
  f.ragged_kv = !f.paged_kv && problem.ragged_kv().has_value();
  if (f.serving()) {
    // No tensor holds the envelope; validation checked every dim against it.
    const Shape& s = problem.shape();
    f.b = s.b;
    f.h_q = s.h_q;
    f.s_q = s.s_q;
    f.d_qk = s.d_qk;
    f.h_kv = s.h_kv;
    f.s_kv = s.s_kv;
    f.d_v = s.d_v;
    if (f.ragged_q) f.total_q = problem.ragged_q()->total;
    if (f.ragged_kv) f.total_kv = problem.ragged_kv()->total;
    if (f.paged_kv) {
      f.page_size = problem.paged_kv()->page_size;
      f.num_pages = problem.paged_kv()->num_pages;
      f.max_pages = problem.paged_kv()->max_pages;
    }
  } else {
    f.b = q.dims[0];
    f.h_q = q.dims[1];
    f.s_q = q.dims[2];
    f.d_qk = q.dims[3];
    f.h_kv = k.dims[1];
    f.s_kv = k.dims[2];
    f.d_v = v.dims[3];
  }
  f.group = f.h_q / f.h_kv;
  f.scale = problem.scale().value_or(1.0 / std::sqrt(static_cast<double>(f.d_qk)));
  f.has_softcap = problem.softcap().has_value();
  f.softcap = problem.softcap().value_or(0.0);
  f.mask = problem.mask();
  f.deterministic = problem.deterministic();
  f.split_tokens = problem.split_tokens().value_or(0);
  return f;
}

std::string serving_decline_reason(const Facts& f, const char* engine) {
  const std::string e(engine);
  if (f.ragged_q) return "ragged_q: " + e + " serves no ragged (packed) query side yet";
  if (f.ragged_kv) return "ragged_kv: " + e + " serves no ragged (packed) key side yet";
  if (f.paged_kv) return "paged_kv: " + e + " serves no paged KV cache yet";
  return "";
}

}  // namespace floe::detail
