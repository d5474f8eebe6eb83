// Global -> shared tile loads with cp.async (16 bytes a thread, L2 only), predicated per chunk:
// a chunk whose row or first column lies past the limits is zero-filled and reads nothing (its
// source address is replaced by a known-valid one, so memory checkers stay quiet).
#pragma once

#include <cute/tensor.hpp>

namespace floe::kernels {

// src, dst, coord: one thread's partition of a tile by a cp.async TiledCopy, (CPY, CPY_ROW,
// CPY_COL), where CPY is one 16-byte chunk. coord holds the (row, col) of each element in the tile.
template <class Src, class Dst, class Coord, class Element>
__device__ __forceinline__ void cp_async_tile(Src const& src, Dst&& dst, Coord&& coord,
                                              int row_limit, int col_limit, const Element* valid) {
  using namespace cute;
  using Op = SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<uint128_t>;
  CUTE_UNROLL
  for (int m = 0; m < size<1>(src); ++m) {
    const bool row_ok = get<0>(coord(0, m, 0)) < row_limit;
    CUTE_UNROLL
    for (int k = 0; k < size<2>(src); ++k) {
      const bool ok = row_ok && get<1>(coord(0, m, k)) < col_limit;
      const Element* from = ok ? &src(0, m, k) : valid;
      Op::copy(*reinterpret_cast<const uint128_t*>(from),
               *reinterpret_cast<uint128_t*>(raw_pointer_cast(&dst(0, m, k))), ok);
    }
  }
}

}  // namespace floe::kernels
