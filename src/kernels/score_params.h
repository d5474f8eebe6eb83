// The score policy (DESIGN §2) as the kernels read it: the scale, the softcap and the band, in
// the units the kernels compute in. Shared by the forward and backward params of every
// tensor-core engine; built once at plan time from the Facts. Plain data, host and device.
//
// The plain kernels (no softcap, no bias, scale > 0) keep raw q.k and fold the scale into the
// exponent: p = exp2(qk * scale_log2 - max * scale_log2). The score-mod kernels turn q.k into
// log2 units first (score_mod.cuh): s2 = qk * scale_log2, or with a softcap
// s2 = cap_log2 * tanh(qk * scale / cap) = cap_log2 - 2 cap_log2 / (exp2(qk * tanh_k) + 1);
// then s2 += bias * log2(e).
#pragma once

#include "kernels/band_mask.h"

namespace floe::kernels {

struct ScoreParams {
  float scale_log2 = 0.f;  // scale * log2(e)
  bool has_softcap = false;
  float cap_log2 = 0.f;  // softcap * log2(e)
  float tanh_k = 0.f;    // 2 * log2(e) * scale / softcap

  BandMask mask;          // unset bounds: unbounded; the offset uses the batch's actual lengths
  bool has_mask = false;  // any bound set
};

}  // namespace floe::kernels
