// Merging attention results by their log-sum-exp (SERVING F.3): parts (O_s, lse_s), each
// normalised over its own keys, combine into O = sum_s exp(lse_s - lse) O_s with
// lse = log sum_s exp(lse_s). The one definition the decode engine's split-KV combine and the
// public merge op share, on the host (the fp64 reference) and the device.
//
// Stable: every exponent is taken relative to the largest lse. A part with lse = -inf (no
// visible key) contributes nothing, whatever its O holds (an unwritten or poisoned O is never
// read); when every part is -inf, O = 0 and lse = -inf. A NaN lse makes O and lse NaN (IEEE,
// DESIGN 2). Parts are visited in the caller's order, so the result is bitwise deterministic.
#pragma once

#include <cmath>

#include "common/host_device.h"

namespace floe::kernels {

template <class F>
struct LseMerge {
  F max = -INFINITY;
  bool nan = false;

  // Pass 1: every part's lse.
  FLOE_HD void see(F lse) {
    if (lse != lse) {
      nan = true;
    } else if (lse > max) {
      max = lse;
    }
  }
  // Pass 2: whether part s is read at all, and its weight exp(lse_s - max) (NaN for a NaN lse).
  FLOE_HD static bool contributes(F lse) { return !(lse == -static_cast<F>(INFINITY)); }
  FLOE_HD F weight(F lse) const { return nan ? static_cast<F>(NAN) : exp_of(lse - max); }
  // After pass 2 with sum = sum of the weights: the merged lse, and the factor that turns the
  // weighted sum of the O_s into O (0 when nothing contributed).
  FLOE_HD F lse(F sum) const {
    if (nan) return static_cast<F>(NAN);
    if (max == -static_cast<F>(INFINITY)) return max;
    return max + log_of(sum);
  }
  FLOE_HD F factor(F sum) const {
    if (nan) return static_cast<F>(NAN);
    return max == -static_cast<F>(INFINITY) ? F(0) : F(1) / sum;
  }

 private:
  static FLOE_HD F exp_of(F x) { return std::exp(x); }
  static FLOE_HD F log_of(F x) { return std::log(x); }
};

}  // namespace floe::kernels
