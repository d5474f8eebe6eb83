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
  f.b = q.dims[0];
  f.h_q = q.dims[1];
  f.s_q = q.dims[2];
  f.d_qk = q.dims[3];
  f.h_kv = k.dims[1];
  f.s_kv = k.dims[2];
  f.d_v = v.dims[3];
  f.group = f.h_q / f.h_kv;
  f.scale = problem.scale().value_or(1.0 / std::sqrt(static_cast<double>(f.d_qk)));
  f.has_softcap = problem.softcap().has_value();
  f.softcap = problem.softcap().value_or(0.0);
  f.mask = problem.mask();
  f.deterministic = problem.deterministic();
  return f;
}

}  // namespace floe::detail
