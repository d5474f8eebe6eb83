// Global -> shared tile loads with cp.async (16 bytes a thread, L2 only), predicated per chunk:
// a chunk whose row or first column lies past the limits is zero-filled and reads nothing (its
// source address is replaced by a known-valid one, so memory checkers stay quiet).
#pragma once

#include <cute/tensor.hpp>

namespace floe::kernels {

// The copy and shared-memory atoms every sm80 attention kernel uses, for a CTA of kThreads:
//  - SmemAtom: 8 rows x 64 elements (128 bytes) swizzled so that ldmatrix and 16-byte cp.async
//    hit all banks; tiles are built from it with tile_to_shape;
//  - ldmatrix (plain and transposed) for MMA operands, 32-bit stores of accumulator pairs;
//  - global tiles: 8 threads per 64-element row, 16 bytes each (cp.async in, 16-byte stores out).
template <class Element, int kThreads>
struct Sm80TileCopies {
  using SmemAtom = decltype(cute::composition(
      cute::Swizzle<3, 3, 3>{},
      cute::Layout<cute::Shape<cute::_8, cute::_64>, cute::Stride<cute::_64, cute::_1>>{}));
  using SmemLoadAtom = cute::Copy_Atom<cute::SM75_U32x4_LDSM_N, Element>;
  using SmemLoadAtomT = cute::Copy_Atom<cute::SM75_U16x8_LDSM_T, Element>;
  using SmemStoreAtom = cute::Copy_Atom<cute::AutoVectorizingCopyWithAssumedAlignment<32>, Element>;
  using GmemThreads = cute::Layout<cute::Shape<cute::Int<kThreads / 8>, cute::_8>,
                                   cute::Stride<cute::_8, cute::_1>>;
  using GmemLoad = decltype(cute::make_tiled_copy(
      cute::Copy_Atom<cute::SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<cute::uint128_t>, Element>{},
      GmemThreads{}, cute::Layout<cute::Shape<cute::_1, cute::_8>>{}));
  using GmemStore = decltype(cute::make_tiled_copy(
      cute::Copy_Atom<cute::UniversalCopy<cute::uint128_t>, Element>{}, GmemThreads{},
      cute::Layout<cute::Shape<cute::_1, cute::_8>>{}));
};

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

// The shared tile `dst` (static rows x cols) from the global tile at `base`, whose rows are
// `row_stride` elements apart (32-bit offsets inside a tile: the planners check rows x stride <
// 2^31), through `thr`, one thread's slice of a cp.async TiledCopy: rows past row_limit and
// columns past col_limit are zero-filled.
template <class ThrCopy, class Element, class Dst>
__device__ __forceinline__ void cp_async_rows(ThrCopy const& thr, const Element* base,
                                              int row_stride, Dst&& dst, int row_limit,
                                              int col_limit) {
  using namespace cute;
  const auto shape = product_each(cute::shape(dst));  // (rows, cols), static
  cp_async_tile(thr.partition_S(make_tensor(make_gmem_ptr(base),
                                            make_layout(shape, make_stride(row_stride, _1{})))),
                thr.partition_D(dst), thr.partition_S(make_identity_tensor(shape)), row_limit,
                col_limit, base);
}

// As cp_async_rows, with each row's address from row_ptr(r) (called for r < row_limit only): rows
// that do not follow one stride, such as the keys of a paged cache. `valid` is any readable
// address (the source of the zero-filled chunks).
template <class ThrCopy, class Element, class Dst, class RowPtr>
__device__ __forceinline__ void cp_async_rows_by(ThrCopy const& thr, RowPtr&& row_ptr,
                                                 const Element* valid, Dst&& dst, int row_limit,
                                                 int col_limit) {
  using namespace cute;
  using Op = SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<uint128_t>;
  const auto shape = product_each(cute::shape(dst));
  Tensor to = thr.partition_D(dst);
  Tensor coord = thr.partition_S(make_identity_tensor(shape));
  CUTE_UNROLL
  for (int m = 0; m < size<1>(to); ++m) {
    const int row = get<0>(coord(0, m, 0));
    const bool row_ok = row < row_limit;
    const Element* from_row = row_ok ? row_ptr(row) : valid;
    CUTE_UNROLL
    for (int k = 0; k < size<2>(to); ++k) {
      const int col = get<1>(coord(0, m, k));
      const bool ok = row_ok && col < col_limit;
      const Element* from = ok ? from_row + col : valid;
      Op::copy(*reinterpret_cast<const uint128_t*>(from),
               *reinterpret_cast<uint128_t*>(raw_pointer_cast(&to(0, m, k))), ok);
    }
  }
}

}  // namespace floe::kernels
