// sm90 forward: the CuTe types of one instantiation. Two or three consumer warpgroups stacked
// along the query rows (64 each) share every GMMA; Q, K and V sit in shared memory in the
// 128-byte-swizzled K-major layout TMA writes (fwd_tiles.h, tma_descriptor.h); V is read transposed
// (MN-major) by the P V product.
#pragma once

#include <cute/arch/mma_sm90.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>

#include "engines/sm90/fwd_tiles.h"

namespace floe::detail::sm90 {

// The types of a tile shape given as numbers (so that variants can be built beside the table's);
// FwdTraits below is the table's. kPingpong_: the two consumer warpgroups take turns issuing
// their products (fwd_mainloop.cuh). kScoreMod_: the score-mod kernel (softcap, bias staged in
// shared memory beside K and V, sink); the plain kernel's types are those of the flag's absence.
template <class Element_, int kD_, int kBlockN_, int kConsumerWarpgroups_, int kStages_,
          bool kPingpong_, bool kScoreMod_ = false, int kDv_ = kD_>
struct FwdTraitsOf {
  using Element = Element_;
  static constexpr int kD = kD_;                             // d_qk
  static constexpr int kDv = kDv_;                           // d_v
  static constexpr int kBlockM = 64 * kConsumerWarpgroups_;  // one warpgroup owns 64 query rows
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  static constexpr int kConsumerWarpgroups = kConsumerWarpgroups_;
  static constexpr FwdTileShape kShape{
      "", kD, kBlockM, kBlockN, kStages, kConsumerWarpgroups, kPingpong_, kDv};
  static constexpr int kThreads = kShape.threads();
  static constexpr int kConsumerThreads = 128 * kConsumerWarpgroups;
  // The score-mod kernel takes turns wherever two consumers do: its softmax (a softcap's three
  // MUFU operations a score) outlasts the products, which pingpong keeps busy meanwhile.
  static constexpr bool kPingpong = (kPingpong_ || kScoreMod_) && kConsumerWarpgroups == 2;
  static constexpr bool kScoreMod = kScoreMod_;
  // The epilogue folds in the sink: the score-mod kernel, and the plain kernel's sink sibling
  // (SinkTraits, fwd_launch.cuh); the plain kernel's epilogue has no sink code.
  static constexpr bool kSink = kScoreMod_;
  // The serving kernel's (ServingTraits, fwd_launch.cuh): ragged (THD) sides, Q, K, V, O and stats
  // addressed at a batch's slot (kernels/sm80/serving_rows.h); the dense kernels compile none of
  // it.
  static constexpr bool kServing = false;
  static constexpr int kBiasStages = kShape.bias_stages();  // fwd_tiles.h
  static constexpr bool kOwnO = kShape.own_o(kScoreMod);    // fwd_tiles.h
  static_assert(kConsumerWarpgroups == 2 || kConsumerWarpgroups == 3, "2 or 3 consumers");

  using BM = cute::Int<kBlockM>;
  using BN = cute::Int<kBlockN>;
  using D = cute::Int<kD>;
  using Dv = cute::Int<kDv>;
  using WGs = cute::Layout<cute::Shape<cute::Int<kConsumerWarpgroups>, cute::_1, cute::_1>>;

  // S = Q K^T: both operands from shared memory.
  using MmaQK = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, float, cute::Shape<cute::_64, BN, D>>(), WGs{}));
  // O += P V: P from registers, V^T (MN-major) from shared memory.
  using MmaPV = decltype(cute::make_tiled_mma(
      cute::GMMA::rs_op_selector<Element, Element, float, cute::Shape<cute::_64, Dv, BN>,
                                 cute::GMMA::Major::K, cute::GMMA::Major::MN>(),
      WGs{}));

  using SmemAtom = cute::GMMA::Layout_K_SW128_Atom<Element>;
  using SmemLayoutQ = decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<BM, D>{}));
  using SmemLayoutK =
      decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<BN, D, cute::Int<kStages>>{}));
  using SmemLayoutV =
      decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<BN, Dv, cute::Int<kStages>>{}));
  // O staged for the epilogue (in a buffer of its own, or in Q's: d_v <= d_qk).
  using SmemLayoutO = decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<BM, Dv>{}));
  static_assert(kDv <= kD, "O is staged in Q's buffer where it has none of its own");
  // The bias tiles (query rows x keys), written by TMA in 64-column boxes as Q's tile is: the
  // swizzle spreads a warp's reads of 8 rows over all 32 banks.
  using SmemLayoutBias =
      decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<BM, BN, cute::Int<kBiasStages>>{}));
  // V^T(d, n, stage) = V(n, d, stage).
  using SmemLayoutVt = decltype(cute::composition(
      SmemLayoutV{}, cute::make_ordered_layout(cute::Shape<Dv, BN, cute::Int<kStages>>{},
                                               cute::Step<cute::_2, cute::_1, cute::_3>{})));

  struct SharedStorage {
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>> q;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>> k;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutV>> v;
    // The epilogue's staging of O where it has its own (else Q's buffer; 8 unused elements).
    alignas(kOwnO ? 1024
                  : 16) cute::array_aligned<Element, kOwnO ? cute::cosize_v<SmemLayoutO> : 8> o;
    // Q a consumer warpgroup at a time: each one's 64 rows have their own full and empty
    // barriers, so that a warpgroup frees its rows (and the producer loads the next tile's) as
    // soon as its own products are done with them, whatever the other warpgroups are doing.
    alignas(8) uint64_t q_full[kConsumerWarpgroups], q_empty[kConsumerWarpgroups];
    uint64_t k_full[kStages], k_empty[kStages], v_full[kStages], v_empty[kStages];
    // The score-mod kernel's bias ring, at the end so that the plain kernel's offsets are those
    // it had before the ring existed (its 8 unused elements and barriers are never touched).
    uint64_t bias_full[kBiasStages], bias_empty[kBiasStages];
    alignas(kScoreMod ? 1024 : 16)
        cute::array_aligned<Element, kScoreMod ? cute::cosize_v<SmemLayoutBias> : 8> bias;
  };
  static constexpr int kSmemBytes = static_cast<int>(sizeof(SharedStorage));
  static_assert(kSmemBytes <= kShape.smem_bytes(kScoreMod),
                "fwd_tiles.h undercounts the shared memory");

  static constexpr uint32_t kQBytes = kBlockM * kD * sizeof(Element);
  static constexpr uint32_t kQRowsBytes = 64 * kD * sizeof(Element);  // one warpgroup's rows
  static constexpr uint32_t kKBytes = kBlockN * kD * sizeof(Element);
  static constexpr uint32_t kVBytes = kBlockN * kDv * sizeof(Element);
  static constexpr uint32_t kBiasBytes = kBlockM * kBlockN * sizeof(Element);

  // Registers per thread after setmaxnreg: the producer keeps few, the consumers take the rest
  // (128 x 24 + 256 x 240 <= 64K; 128 x 24 + 384 x 160 with three consumers).
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = kConsumerWarpgroups == 2 ? 240 : 160;
};

template <FwdTile kTile, class Element, bool kScoreMod = false>
using FwdTraits =
    FwdTraitsOf<Element, fwd_tile_shape(kTile).d, fwd_tile_shape(kTile).block_n,
                fwd_tile_shape(kTile).consumer_warpgroups, fwd_tile_shape(kTile).stages,
                fwd_tile_shape(kTile).pingpong, kScoreMod, fwd_tile_shape(kTile).d_v()>;

}  // namespace floe::detail::sm90
