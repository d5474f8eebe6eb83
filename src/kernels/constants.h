// log2(e) and ln(2), once for every engine: kernels work in base 2 (exp2 and lg2 are the
// special-function unit's), so scores and statistics cross between the natural and the binary
// logarithm at these factors. The planners fold scale * log2(e) into a parameter in double
// before rounding it once to float (kLog2eOf<double>).
#pragma once

namespace floe::kernels {

template <class T>
inline constexpr T kLog2eOf = static_cast<T>(1.4426950408889634);
inline constexpr float kLog2e = kLog2eOf<float>;
inline constexpr float kLn2 = 0.6931471805599453f;

}  // namespace floe::kernels
