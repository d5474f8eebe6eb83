// sm80 backward: every compile-time type of one kernel instantiation, derived from a tile shape
// (bwd_tiles.h) and the element type. Three tiled MMAs share the CTA's warps:
//   SdP (block_m x block_n): S = Q K^T and dP = dO V^T;
//   dKV (block_n x d):       dV += P^T dO and dK += dS^T Q (the CTA's accumulators);
//   dQ  (block_m x d_qk):    dQ = dS K, added to the fp32 accumulator in global memory.
// P and dS go through shared memory because dV and dK read them transposed.
#pragma once

#include <cutlass/numeric_types.h>
#include <cute/tensor.hpp>

#include "engines/sm80/bwd_tiles.h"
#include "kernels/sm80/copy.cuh"

namespace floe::detail::sm80 {

template <int kDqk_, int kDv_, int kBlockM_, int kBlockN_, int kWarps_, int kAtomMSdP_,
          int kAtomNdKV_, int kAtomMdQ_, int kQStages_, class Element_>
struct BwdTraitsT {
  using Element = Element_;
  static constexpr int kDqk = kDqk_;
  static constexpr int kDv = kDv_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kWarps = kWarps_;
  static constexpr int kThreads = kWarps_ * 32;
  static constexpr int kQStages = kQStages_;

  static_assert(kDqk % 64 == 0 && kDv % 64 == 0 && kBlockM % 32 == 0 && kBlockN % 32 == 0,
                "head dims are whole 128-byte swizzled rows; P and dS rows 64 or 128 bytes");
  static_assert(kQStages == 1 || kQStages == 2, "one or two Q/dO buffers");

  using MmaOp =
      std::conditional_t<std::is_same_v<Element, cute::half_t>, cute::SM80_16x8x16_F32F16F16F32_TN,
                         cute::SM80_16x8x16_F32BF16BF16F32_TN>;
  template <int kAtomM>
  using WarpTiledMma = cute::TiledMMA<
      cute::MMA_Atom<MmaOp>,
      cute::Layout<cute::Shape<cute::Int<kAtomM>, cute::Int<kWarps / kAtomM>, cute::_1>>,
      cute::Tile<cute::Int<16 * kAtomM>, cute::Int<16 * (kWarps / kAtomM)>, cute::_16>>;
  // P is stored to shared memory before dP = dO V^T is computed (its exponentials then overlap
  // that product) where the registers allow it; at d128 the order cost 2% (56 B of spills).
  static constexpr bool kStorePFirst = kDqk <= 64 && kDv <= 64;

  using TiledMmaSdP = WarpTiledMma<kAtomMSdP_>;
  using TiledMmadKV = WarpTiledMma<kAtomNdKV_>;
  using TiledMmadQ = WarpTiledMma<kAtomMdQ_>;

  using Copies = kernels::Sm80TileCopies<Element, kThreads>;
  using SmemAtom = typename Copies::SmemAtom;
  template <int kRows, int kCols>
  using SmemLayout =
      decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<cute::Int<kRows>, cute::Int<kCols>>{}));
  // The same memory seen transposed: (cols, rows), for ldmatrix.trans.
  template <class L, int kRows, int kCols>
  using Transposed = decltype(cute::composition(
      L{}, cute::make_layout(cute::Shape<cute::Int<kCols>, cute::Int<kRows>>{},
                             cute::Stride<cute::Int<kRows>, cute::_1>{})));

  // Q and dO carry a stage dim (kQStages buffers): (rows, cols, stages), seen transposed as (cols,
  // rows, stages).
  template <int kRows, int kCols>
  using SmemLayout2 = decltype(cute::tile_to_shape(
      SmemAtom{}, cute::Shape<cute::Int<kRows>, cute::Int<kCols>, cute::Int<kQStages>>{}));
  template <class L, int kRows, int kCols>
  using Transposed2 = decltype(cute::composition(
      L{},
      cute::make_layout(cute::Shape<cute::Int<kCols>, cute::Int<kRows>, cute::Int<kQStages>>{},
                        cute::Stride<cute::Int<kRows>, cute::_1, cute::Int<kRows * kCols>>{})));

  using SmemLayoutQ = SmemLayout2<kBlockM, kDqk>;
  using SmemLayoutQt = Transposed2<SmemLayoutQ, kBlockM, kDqk>;
  using SmemLayoutdO = SmemLayout2<kBlockM, kDv>;
  using SmemLayoutdOt = Transposed2<SmemLayoutdO, kBlockM, kDv>;
  using SmemLayoutK = SmemLayout<kBlockN, kDqk>;
  using SmemLayoutKt = Transposed<SmemLayoutK, kBlockN, kDqk>;
  using SmemLayoutV = SmemLayout<kBlockN, kDv>;
  // P and dS rows are block_n elements: 32-key tiles take the 64-byte-row form of the swizzle
  // (conflict-free ldmatrix on 64-byte rows).
  using SmemAtomP = std::conditional_t<
      kBlockN % 64 == 0, SmemAtom,
      decltype(cute::composition(
          cute::Swizzle<2, 3, 3>{},
          cute::Layout<cute::Shape<cute::_8, cute::_32>, cute::Stride<cute::_32, cute::_1>>{}))>;
  using SmemLayoutP = decltype(cute::tile_to_shape(
      SmemAtomP{}, cute::Shape<cute::Int<kBlockM>, cute::Int<kBlockN>>{}));  // also dS
  using SmemLayoutPt = Transposed<SmemLayoutP, kBlockM, kBlockN>;

  using SmemLoadAtom = typename Copies::SmemLoadAtom;
  using SmemLoadAtomT = typename Copies::SmemLoadAtomT;
  using SmemStoreAtom = typename Copies::SmemStoreAtom;
  using GmemLoad = typename Copies::GmemLoad;
  using GmemStore = typename Copies::GmemStore;

  // Shared memory, in bytes from the start: Q[kQStages], dO[kQStages], K, V, P, dS.
  static constexpr int kQBytes = kBlockM * kDqk * 2;
  static constexpr int kdOBytes = kBlockM * kDv * 2;
  static constexpr int kOffdO = kQStages * kQBytes;
  static constexpr int kOffK = kOffdO + kQStages * kdOBytes;
  static constexpr int kOffV = kOffK + kBlockN * kDqk * 2;
  static constexpr int kOffP = kOffV + kBlockN * kDv * 2;
  static constexpr int kOffdS = kOffP + kBlockM * kBlockN * 2;
  static constexpr int kSmemBytes = kOffdS + kBlockM * kBlockN * 2;
  static constexpr BwdTileShape kShape{kDqk,       kDv,        kBlockM,   kBlockN, kWarps,
                                       kAtomMSdP_, kAtomNdKV_, kAtomMdQ_, kQStages};
  static_assert(kSmemBytes == kShape.smem_bytes(), "bwd_tiles.h and the traits disagree");

  // The bias kinds stage a visit's bias tile in dS's buffer with the 16-byte tile copies (rows of
  // whole 64-element copy tiles) and write dBias from it, where a thread holds at most 32 scores
  // (the staged values are read into registers beside them: d64's 64 a thread spilled 100 bytes
  // in its bias kernel; ptxas, sm_90a). d64 and d256m32's 32-key rows read the bias from global
  // memory and write dBias element by element.
  static constexpr bool kStageBias =
      kBlockN % 64 == 0 && kBlockM % (kThreads / 8) == 0 && kBlockM * kBlockN <= 32 * kThreads;
};

template <BwdTile kTile, class Element>
using BwdTraits =
    BwdTraitsT<bwd_tile_shape(kTile).d_qk, bwd_tile_shape(kTile).d_v, bwd_tile_shape(kTile).block_m,
               bwd_tile_shape(kTile).block_n, bwd_tile_shape(kTile).warps,
               bwd_tile_shape(kTile).atom_m_sdp, bwd_tile_shape(kTile).atom_n_dkv,
               bwd_tile_shape(kTile).atom_m_dq, bwd_tile_shape(kTile).q_stages, Element>;

}  // namespace floe::detail::sm80
