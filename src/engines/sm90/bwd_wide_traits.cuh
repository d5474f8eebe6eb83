// sm90 backward for wide heads (d256): the CuTe types of one instantiation. dK and dV of 64 keys
// x 256 columns are 256 fp32 registers a thread in one warpgroup, more than it has, so both
// consumer warpgroups own the same 64 keys and split the work differently from bwd_traits.cuh:
//   S^T  = K Q^T    SS, M = keys, N = the warpgroup's half of the visit's queries, K = d
//   dP^T = V dO^T   the same shape, K = d_v
//   P^T and dS^T go to shared memory (bf16 or f16, two buffers), where both warpgroups read all
//   of them; then each takes one half of d:
//   dV  += P^T dO   SS, M = keys, N = its half of d_v, K = queries (P^T K-major, dO MN-major)
//   dK  += dS^T Q   SS, the same shape over d
//   dQ   = dS K     SS, M = queries, N = its half of d, K = keys (dS: the dS^T tile read
//                   MN-major; K MN-major), added into the workspace's dq_accum from registers
//                   (red.global.add.v4.f32 in fragment order: no shared memory left for a tile)
// so a thread holds 64 + 64 floats of dK and dV and 64 of dQ. Five products a visit, as the other
// kernels; all five read both operands from shared memory (FA3's d256 scheme is alike: P and dS
// through shared memory, dQ by atomics).
#pragma once

#include <cute/arch/copy_sm90.hpp>
#include <cute/arch/mma_sm90.hpp>
#include <cute/atom/copy_atom.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>

namespace floe::detail::sm90 {

template <class Element_, int kD_, int kBlockM_, int kBlockN_, int kStages_, bool kSoftcap_ = false>
struct BwdWideTraitsOf {
  static constexpr bool kWide = true;
  static constexpr bool kSoftcap = kSoftcap_;
  static constexpr bool kBias = false;  // no room for a bias ring (bwd_tiles.h)
  static constexpr uint32_t kBiasBytes = 0;
  using PlainTraits = BwdWideTraitsOf<Element_, kD_, kBlockM_, kBlockN_, kStages_, false>;
  using Element = Element_;
  static constexpr int kD = kD_;
  static constexpr int kDv = kD_;
  static constexpr int kBlockM = kBlockM_;  // queries a visit, half a warpgroup
  static constexpr int kBlockN = kBlockN_;  // keys a CTA, shared by both warpgroups
  static constexpr int kStages = kStages_;
  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kConsumerThreads = 256;
  static constexpr int kThreads = kConsumerThreads + 128;
  static_assert(kBlockN == 64, "one GMMA row block of keys");
  static_assert(kBlockM % 16 == 0 && kD % 128 == 0, "halves of the queries and of d");
  // Members the shared kernels read (bwd_dq_convert.cuh): dQ is neither transposed nor in thirds.
  static constexpr bool kDqSwapAB = false;
  static constexpr bool kDqThirds = false;

  using BM = cute::Int<kBlockM>;
  using BN = cute::Int<kBlockN>;
  using D = cute::Int<kD>;
  using Stages = cute::Int<kStages>;
  using WGsN = cute::Layout<cute::Shape<cute::_1, cute::_2, cute::_1>>;

  using MmaSdP = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, float,
                                 cute::Shape<cute::_64, cute::Int<kBlockM / 2>, D>,
                                 cute::GMMA::Major::K, cute::GMMA::Major::K>(),
      WGsN{}));
  // dV and dK: A = P^T / dS^T (keys, queries) K-major, B = dO^T / Q^T (d, queries) MN-major.
  using MmadKV = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, float,
                                 cute::Shape<cute::_64, cute::Int<kD / 2>, BM>,
                                 cute::GMMA::Major::K, cute::GMMA::Major::MN>(),
      WGsN{}));
  // dQ: A = dS (queries, keys), the dS^T tile read MN-major; B = K^T (d, keys) MN-major. In two
  // passes over d (columns [0, kD / 2), then the rest), each warpgroup a quarter of d a pass, so
  // that 32 floats of dQ live beside dK and dV, not 64 (all 64: ptxas spilled 1 KB and serialised
  // the GMMAs). Over the whole TileDq (the dQ convert's view) the same MMA's partition holds pass
  // n's values at fragment indices [32 n, 32 n + 32).
  using MmadQ = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, float, cute::Shape<BM, cute::Int<kD / 4>, BN>,
                                 cute::GMMA::Major::MN, cute::GMMA::Major::MN>(),
      WGsN{}));
  static constexpr int kDqPasses = 2;
  using TileSdP = cute::Shape<BN, BM>;
  using TileKV = cute::Shape<BN, D>;
  using TileDq = cute::Shape<BM, D>;
  using TileDqPass = cute::Shape<BM, cute::Int<kD / 2>>;

  using SmemAtom = cute::GMMA::Layout_K_SW128_Atom<Element>;
  using SmemLayoutQ = decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<BM, D, Stages>{}));
  using SmemLayoutQt = decltype(cute::composition(
      SmemLayoutQ{}, cute::make_ordered_layout(cute::Shape<D, BM, Stages>{},
                                               cute::Step<cute::_2, cute::_1, cute::_3>{})));
  using SmemLayoutdO = SmemLayoutQ;
  using SmemLayoutdOt = SmemLayoutQt;
  using SmemLayoutK = decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<BN, D>{}));
  using SmemLayoutV = SmemLayoutK;
  // Half of K's columns as K^T (d, keys): dQ's pass n starts at chunk 2 n of the [d / 64][keys][64]
  // tile.
  using SmemLayoutKtHalf = decltype(cute::composition(
      cute::tile_to_shape(SmemAtom{}, cute::Shape<BN, cute::Int<kD / 2>>{}),
      cute::make_ordered_layout(cute::Shape<cute::Int<kD / 2>, BN>{},
                                cute::Step<cute::_2, cute::_1>{})));
  static constexpr int kKtHalfElems = kBlockN * kD / 2;
  // P^T and dS^T (key, query, buffer), queries contiguous: the A operand of dV and dK as written,
  // and read as dS (query, key, buffer) by dQ.
  using SmemLayoutPt = decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<BN, BM, cute::_2>{}));
  using SmemLayoutdS = decltype(cute::composition(
      SmemLayoutPt{}, cute::make_ordered_layout(cute::Shape<BM, BN, cute::_2>{},
                                                cute::Step<cute::_2, cute::_1, cute::_3>{})));
  using SmemCopyPt = decltype(cute::make_tiled_copy_C(
      cute::Copy_Atom<cute::SM90_U32x4_STSM_N, Element>{}, MmaSdP{}));

  // dQ of one visit in fragment order, as bwd_traits.cuh's: warpgroup w's 64 x kD / 2 share at
  // [w][j][thread][4], which the dQ convert reads back through MmadQ's partition.
  static constexpr int kDqHalfFloats = kBlockM * kD / 2;
  static constexpr int kDqFrag = kDqHalfFloats / 128;
  static_assert(kDqFrag % 4 == 0, "float4 reduce-adds of the dQ fragment");

  struct SharedStorage {
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>> q;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutdO>> d_o;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>> k;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutV>> v;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutPt>> pt;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutPt>> dst;
    alignas(16) float lse[kStages][kBlockM];
    alignas(16) float delta[kStages][kBlockM];
    alignas(8) uint64_t kv_full;
    uint64_t q_full[kStages], do_full[kStages], q_empty[kStages], do_empty[kStages];
    uint64_t turn_ready, dq_added;  // deterministic mode's hand-over (bwd_wide_kernel.cuh)
  };
  static constexpr int kSmemBytes = static_cast<int>(sizeof(SharedStorage));

  static constexpr uint32_t kQBytes = kBlockM * kD * sizeof(Element);
  static constexpr uint32_t kKBytes = kBlockN * kD * sizeof(Element);
  static constexpr uint32_t kDoBytes = kQBytes;
  static constexpr uint32_t kVBytes = kKBytes;
  static constexpr uint32_t kRowStatBytes = kBlockM * sizeof(float);

  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per block");
};

}  // namespace floe::detail::sm90
