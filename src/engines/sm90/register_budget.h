// sm90: whether a kernel's setmaxnreg split fits the registers its CTA holds. A CTA keeps the
// registers it was launched with (ptxas gives a kernel that uses setmaxnreg the most its launch
// bounds allow: 65536 / threads, rounded down to 8), and setmaxnreg only moves them between its
// warpgroups: an increase that asks for more than the others released waits forever. So 384
// threads hold 168 x 384 = 64512, and 128 x 32 + 256 x 240 = 65536 hangs the consumers at their
// setmaxnreg (2daafee's serving producer at 32, a hang on the H200 in session 13), where 512
// threads hold all 65536 (128 x 32 + 384 x 160 fits).
#pragma once

namespace floe::detail::sm90 {

constexpr int launch_registers_per_thread(int threads) {
  return 65536 / threads / 8 * 8;
}

constexpr bool setmaxnreg_fits(int threads, int producer_regs, int consumer_regs) {
  return 128 * producer_regs + (threads - 128) * consumer_regs <=
         launch_registers_per_thread(threads) * threads;
}

static_assert(setmaxnreg_fits(384, 24, 240) && !setmaxnreg_fits(384, 32, 240) &&
                  setmaxnreg_fits(512, 32, 160) && !setmaxnreg_fits(512, 40, 160),
              "the register budget's arithmetic");

}  // namespace floe::detail::sm90
