// The diagonal band mask and padding of DESIGN §2, one definition for host and device.
#pragma once

#include <cstdint>

#include "common/host_device.h"
#include "floe/problem.h"

namespace floe::kernels {

struct BandMask {
  bool has_left = false, has_right = false, bottom_right = false;
  int64_t left = 0, right = 0;

  static BandMask from(const Mask& m) {
    BandMask b;
    b.has_left = m.left.has_value();
    b.has_right = m.right.has_value();
    b.left = m.left.value_or(0);
    b.right = m.right.value_or(0);
    b.bottom_right = m.align == MaskAlign::bottom_right;
    return b;
  }

  // The diagonal's offset for batch lengths sq_b, skv_b.
  FLOE_HD int64_t offset(int64_t sq_b, int64_t skv_b) const {
    return bottom_right ? skv_b - sq_b : 0;
  }
  // Visible keys of query i form [first_key, last_key], clipped to [0, skv_b - 1] by callers.
  FLOE_HD int64_t first_key(int64_t i, int64_t off) const {
    return has_left ? i + off - left : INT64_MIN / 4;
  }
  FLOE_HD int64_t last_key(int64_t i, int64_t off) const {
    return has_right ? i + off + right : INT64_MAX / 4;
  }
  FLOE_HD bool visible(int64_t i, int64_t j, int64_t off) const {
    return j >= first_key(i, off) && j <= last_key(i, off);
  }
};

}  // namespace floe::kernels
