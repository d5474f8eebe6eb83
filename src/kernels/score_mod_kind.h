// Which score mods a tensor-core kernel instantiation carries (DESIGN §2: scale, softcap, bias).
// A kernel carries only the code of its kind: the plain kernel keeps raw q.k and folds the scale
// into the exponent; the bias kernel has no softcap code and the softcap kernel no bias code (an
// unused path is not free: ptxas if-converts a runtime choice and issues both sides predicated;
// on the sm80 bias forward the unused softcap path was 24% of the issued instructions). Host and
// device.
#pragma once

namespace floe::kernels {

enum class ScoreMod : int {
  plain = 0,         // scale > 0, no softcap, no bias: the scale folds into the exponent
  bias = 1,          // s2 = q.k * scale_log2, + bias where there is one (a bias, or scale <= 0)
  softcap = 2,       // s2 = cap_log2 * tanh(q.k * scale / cap), no bias
  softcap_bias = 3,  // the softcap, then + bias
};
inline constexpr int kScoreModCount = 4;

inline constexpr bool has_bias_code(ScoreMod m) {
  return m == ScoreMod::bias || m == ScoreMod::softcap_bias;
}
inline constexpr bool has_softcap_code(ScoreMod m) {
  return m == ScoreMod::softcap || m == ScoreMod::softcap_bias;
}

// The kind a problem needs.
inline constexpr ScoreMod score_mod_for(bool softcap, bool bias, bool positive_scale) {
  if (softcap) return bias ? ScoreMod::softcap_bias : ScoreMod::softcap;
  return bias || !positive_scale ? ScoreMod::bias : ScoreMod::plain;
}

// In kernel names: sm80_fwd_d128_bf16_<suffix>.
inline constexpr const char* score_mod_suffix(ScoreMod m) {
  switch (m) {
    case ScoreMod::plain:
      return "plain";
    case ScoreMod::bias:
      return "bias";
    case ScoreMod::softcap:
      return "softcap";
    default:
      return "softcap_bias";
  }
}

}  // namespace floe::kernels
