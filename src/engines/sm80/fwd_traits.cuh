// sm80 forward: every compile-time type of one kernel instantiation, derived from a tile shape
// (fwd_tiles.h) and the element type.
#pragma once

#include <cutlass/numeric_types.h>
#include <cute/tensor.hpp>

#include "engines/sm80/fwd_tiles.h"
#include "kernels/sm80/bias_tile.cuh"
#include "kernels/sm80/copy.cuh"

namespace floe::detail::sm80 {

template <int kDqk_, int kDv_, int kBlockM_, int kBlockN_, int kWarps_, int kStages_, int kMinCtas_,
          class Element_>
struct FwdTraitsT {
  using Element = Element_;  // cute::half_t or cute::bfloat16_t
  static constexpr int kDqk = kDqk_;
  static constexpr int kDv = kDv_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kWarps = kWarps_;
  static constexpr int kThreads = kWarps_ * 32;
  static constexpr int kStages = kStages_;
  static constexpr int kMinCtas = kMinCtas_;

  static_assert(kDqk % 64 == 0 && kDv % 64 == 0, "head-dim tiles are whole 128-byte smem rows");
  static_assert(kDv <= kDqk, "O is staged in Q's shared memory");
  static_assert(kBlockM % (16 * kWarps) == 0, "each warp owns whole m16 row blocks");
  static_assert(kBlockN % 16 == 0, "keys come in k16 slices");
  static_assert(kStages == 1 || kStages == 2, "one or two K/V buffers");
  static_assert(kBlockN % (kThreads / 8) == 0 && kBlockM % (kThreads / 8) == 0,
                "the cp.async thread layout tiles the rows");

  using MmaOp =
      std::conditional_t<std::is_same_v<Element, cute::half_t>, cute::SM80_16x8x16_F32F16F16F32_TN,
                         cute::SM80_16x8x16_F32BF16BF16F32_TN>;
  // Warps stacked along the query rows; every warp sees the whole key (n) and head-dim extent,
  // so row reductions stay within a quad of lanes. N is tiled by 16 so B loads use ldmatrix.x4.
  using TiledMma = cute::TiledMMA<cute::MMA_Atom<MmaOp>,
                                  cute::Layout<cute::Shape<cute::Int<kWarps>, cute::_1, cute::_1>>,
                                  cute::Tile<cute::Int<16 * kWarps>, cute::_16, cute::_16>>;

  using Copies = kernels::Sm80TileCopies<Element, kThreads>;
  using SmemAtom = typename Copies::SmemAtom;
  using SmemLayoutQ =
      decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kDqk>>{}));
  using SmemLayoutK = decltype(cute::tile_to_shape(
      SmemAtom{}, cute::Shape<cute::Int<kBlockN>, cute::Int<kDqk>, cute::Int<kStages>>{}));
  using SmemLayoutV = decltype(cute::tile_to_shape(
      SmemAtom{}, cute::Shape<cute::Int<kBlockN>, cute::Int<kDv>, cute::Int<kStages>>{}));
  // V seen as V^T (d, n, stage): the B operand of O += P V, read with ldmatrix.trans.
  using SmemLayoutVt = decltype(cute::composition(
      SmemLayoutV{},
      cute::make_layout(cute::Shape<cute::Int<kDv>, cute::Int<kBlockN>, cute::Int<kStages>>{},
                        cute::Stride<cute::Int<kBlockN>, cute::_1, cute::Int<kBlockN * kDv>>{})));
  using SmemLayoutO =
      decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kDv>>{}));

  using SmemLoadAtom = typename Copies::SmemLoadAtom;
  using SmemLoadAtomT = typename Copies::SmemLoadAtomT;
  using SmemStoreAtomO = typename Copies::SmemStoreAtom;
  using GmemLoad = typename Copies::GmemLoad;
  using GmemStore = typename Copies::GmemStore;

  static constexpr int kSmemQBytes = kBlockM * kDqk * 2;
  static constexpr int kSmemKBytes = kStages * kBlockN * kDqk * 2;
  static constexpr int kSmemVBytes = kStages * kBlockN * kDv * 2;
  static constexpr int kSmemBytes = kSmemQBytes + kSmemKBytes + kSmemVBytes;
  static constexpr FwdTileShape kShape{kDqk, kDv, kBlockM, kBlockN, kWarps, kStages, kMinCtas};
  static_assert(kSmemBytes == kShape.smem_bytes(), "fwd_tiles.h and the traits disagree");

  // The bias kernels stage each key step's bias tile in shared memory after V, one buffer per
  // K stage, where that keeps the tile in its part class (kernels/sm80/bias_tile.cuh) and its
  // key steps are at most 64 keys (d64's 128-key steps spilled 2288 bytes with the staged tile,
  // 372 without; ptxas, sm_90a); the other tiles (d64, d192x128, d256m64) read the bias from
  // global memory.
  using BiasTile = kernels::Sm80BiasTile<Element, kBlockM, kBlockN, kThreads>;
  static constexpr int kSmemBiasBytes = kStages * BiasTile::kBytes;
  static constexpr bool kStageBias =
      kBlockN <= 64 && kernels::same_smem_class(kSmemBytes, kSmemBytes + kSmemBiasBytes);
};

// The traits of a compiled tile (fwd_tiles.h).
template <FwdTile kTile, class Element>
using FwdTraits =
    FwdTraitsT<fwd_tile_shape(kTile).d_qk, fwd_tile_shape(kTile).d_v, fwd_tile_shape(kTile).block_m,
               fwd_tile_shape(kTile).block_n, fwd_tile_shape(kTile).warps,
               fwd_tile_shape(kTile).stages, fwd_tile_shape(kTile).min_ctas, Element>;

}  // namespace floe::detail::sm80
