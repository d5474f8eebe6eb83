// sm90 backward: the CuTe types of one instantiation. A CTA owns kBlockN keys (64 per consumer
// warpgroup, stacked along the keys) and visits query tiles of kBlockM rows. Everything is
// computed transposed (keys along the GMMA's M) so that P^T and dS^T land in the accumulator
// layout that is the register A operand of dV += P^T dO and dK += dS^T Q (FA3's scheme):
//   S^T  = K Q^T    SS GMMA, M = keys, N = queries, K = d
//   dP^T = V dO^T   SS GMMA, the same shape but K = d_v
//   dV  += P^T dO   RS GMMA, M = keys, N = d_v, K = queries (dO read MN-major)
//   dK  += dS^T Q   RS GMMA, the same shape but N = d (Q read MN-major)
//   dQ   = dS K     SS GMMA, M = queries, N = d split between the warpgroups, K = keys
//                   (dS through shared memory, K read MN-major); its fp32 accumulator goes to
//                   shared memory in fragment order (below) and is added into the workspace's
//                   dq_accum by one bulk reduce-add per warpgroup
// Q, dO, K, V sit in shared memory in the 128-byte-swizzled K-major layout TMA writes
// (tma_descriptor.h); dS in the same layout, written by the consumers.
#pragma once

#include <cute/arch/copy_sm75.hpp>
#include <cute/arch/copy_sm90.hpp>
#include <cute/arch/mma_sm90.hpp>
#include <cute/atom/copy_atom.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
// The 64 x 80 GMMA atoms (bwd_ss_op), which CuTe includes only with
// CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED.
#include <cute/arch/mma_sm90_gmma_ext.hpp>
#include <cute/atom/mma_traits_sm90_gmma_ext.hpp>
#include <cute/tensor.hpp>
#include <type_traits>

namespace floe::detail::sm90 {

// The SS GMMA atom for a 64 x N tile: CuTe's selector, except N = 80 (query tiles of 80 rows),
// 48 and 24 (query tiles of 48 rows and their halves), which the selector offers only with
// CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED (else it falls back to N = 16 or 8 instructions).
template <class Element, int kN, cute::GMMA::Major kMajorA, cute::GMMA::Major kMajorB, int kK>
constexpr auto bwd_ss_op() {
  using namespace cute::SM90::GMMA;
  constexpr bool kBf16 = std::is_same_v<Element, cute::bfloat16_t>;
  if constexpr (kN == 80 && kBf16) {
    return MMA_64x80x16_F32BF16BF16_SS<kMajorA, kMajorB>{};
  } else if constexpr (kN == 80) {
    return MMA_64x80x16_F32F16F16_SS<kMajorA, kMajorB>{};
  } else if constexpr (kN == 48 && kBf16) {
    return MMA_64x48x16_F32BF16BF16_SS<kMajorA, kMajorB>{};
  } else if constexpr (kN == 48) {
    return MMA_64x48x16_F32F16F16_SS<kMajorA, kMajorB>{};
  } else if constexpr (kN == 24 && kBf16) {
    return MMA_64x24x16_F32BF16BF16_SS<kMajorA, kMajorB>{};
  } else if constexpr (kN == 24) {
    return MMA_64x24x16_F32F16F16_SS<kMajorA, kMajorB>{};
  } else {
    return cute::GMMA::ss_op_selector<Element, Element, float,
                                      cute::Shape<cute::_64, cute::Int<kN>, cute::Int<kK>>, kMajorA,
                                      kMajorB>();
  }
}

// kOverlapDq_: dQ = dS K issued while dV and dK are in flight (more registers live);
// kDoubleBufferDs_: two dS tiles in smem, one named barrier fewer per visit.
// kDqBeforeDk_: the order dV, dQ, dK, so that dQ's store to shared memory runs under dK.
// kD_ is d_qk (Q, K, dQ, dK); kDv_ d_v (V, dO, dV) where it differs (192 / 128: Dv not padded).
// kSoftcap_: the softcap kernel (S through cap * tanh, dS times d tanh); kBias_: the bias kernel
// (a bias tile a Q/dO stage, added to S^T; dBias stored from dS's tile: bwd_bias.cuh). Last, the
// bias ring after the plain kernel's shared storage, so that the plain kernel's code stays as it
// was.
template <class Element_, int kD_, int kBlockM_, int kBlockN_, int kStages_,
          bool kOverlapDq_ = false, bool kDoubleBufferDs_ = false, bool kDqBeforeDk_ = false,
          int kDv_ = kD_, bool kSoftcap_ = false, bool kBias_ = false>
struct BwdTraitsOf {
  static constexpr bool kWide = false;  // bwd_wide_traits.cuh's scheme
  static constexpr bool kSoftcap = kSoftcap_;
  static constexpr bool kBias = kBias_;
  static_assert(!(kSoftcap_ && kBias_), "the bias kernel has no softcap (bwd_plan.cc declines)");
  // The same tile without a score mod: the kernels other than the main one (the dQ conversion)
  // are instantiated with it, once for every main kernel.
  using PlainTraits = BwdTraitsOf<Element_, kD_, kBlockM_, kBlockN_, kStages_, kOverlapDq_,
                                  kDoubleBufferDs_, kDqBeforeDk_, kDv_, false, false>;
  static constexpr bool kOverlapDq = kOverlapDq_;
  static constexpr bool kDqBeforeDk = kDqBeforeDk_;
  static constexpr bool kDoubleBufferDs = kDoubleBufferDs_;
  static constexpr int kDsBuffers = kDoubleBufferDs_ ? 2 : 1;
  using Element = Element_;
  static constexpr int kD = kD_;
  static constexpr int kDv = kDv_;
  static constexpr int kBlockM = kBlockM_;  // queries per visited tile
  static constexpr int kBlockN = kBlockN_;  // keys per CTA, 64 per consumer warpgroup
  static constexpr int kStages = kStages_;  // Q / dO ring depth
  static constexpr int kConsumerWarpgroups = kBlockN / 64;
  static constexpr int kConsumerThreads = 128 * kConsumerWarpgroups;
  static constexpr int kThreads = kConsumerThreads + 128;
  static_assert(kConsumerWarpgroups == 2, "two consumer warpgroups");
  // dQ's d columns: 64 per warpgroup or a multiple of 128 split in halves (MN-major K needs
  // whole 64-column chunks), or three chunks (192): see kDqThirds.
  static_assert(kD % (64 * kConsumerWarpgroups) == 0 || kD == 64 || kD == 192,
                "d splits over the dQ product");

  using BM = cute::Int<kBlockM>;
  using BN = cute::Int<kBlockN>;
  using D = cute::Int<kD>;
  using Dv = cute::Int<kDv>;
  using Stages = cute::Int<kStages>;
  using WGsM = cute::Layout<cute::Shape<cute::Int<kConsumerWarpgroups>, cute::_1, cute::_1>>;
  using WGsN = cute::Layout<cute::Shape<cute::_1, cute::Int<kConsumerWarpgroups>, cute::_1>>;

  using MmaSdP = decltype(cute::make_tiled_mma(
      bwd_ss_op<Element, kBlockM, cute::GMMA::Major::K, cute::GMMA::Major::K, kD>(), WGsM{}));
  using MmadKV = decltype(cute::make_tiled_mma(
      cute::GMMA::rs_op_selector<Element, Element, float, cute::Shape<cute::_64, D, BM>,
                                 cute::GMMA::Major::K, cute::GMMA::Major::MN>(),
      WGsM{}));  // dK (N = d)
  using MmadV = decltype(cute::make_tiled_mma(
      cute::GMMA::rs_op_selector<Element, Element, float, cute::Shape<cute::_64, Dv, BM>,
                                 cute::GMMA::Major::K, cute::GMMA::Major::MN>(),
      WGsM{}));  // dV (N = d_v)
  // A query tile that is not a multiple of 64 rows (80: FA3's d128 tile) cannot be dQ's M, so
  // dQ is computed transposed: dQ^T = K^T dS^T, M = d split between the warpgroups (d = 128),
  // N = queries, K = keys (K^T read MN-major, dS K-major, both from the same smem tiles).
  // d = 192 (three 64-column chunks, which two warpgroups cannot halve: MN-major K^T and K need
  // whole chunks) is computed transposed too, in thirds: warpgroup w takes chunk w for every query
  // and chunk 2 for its half of the queries (two GMMAs of 64 x kBlockM and 64 x kBlockM / 2, one
  // warpgroup each), so both hold the same share (dq_third_coord says where each value belongs).
  static constexpr bool kDqThirds = kD == 192;
  static constexpr bool kDqSwapAB = kBlockM % 64 != 0 || kDqThirds;
  static_assert(!kDqSwapAB || kDqThirds || kD == 64 * kConsumerWarpgroups,
                "dQ^T: d is 64 per warpgroup");
  static_assert(!kDqThirds || (kConsumerWarpgroups == 2 && kBlockM % 16 == 0), "dQ in thirds");
  // A query tile of 64 rows per warpgroup (128: FA3's d64 tile) splits dQ along the queries, as
  // FA3 does there: each warpgroup's product is 64 x d from its own half of dS (a split of d
  // would give each two M atoms of N = 32 reading all of dS; not measured). A 64-row tile splits d.
  static constexpr bool kDqSplitM = !kDqSwapAB && kBlockM == 64 * kConsumerWarpgroups;
  template <bool kSwap, int = 0>
  struct DqMma {  // dQ = dS K: M = queries, N = d, split between the warpgroups (above)
    using AtomShape = std::conditional_t<kDqSplitM, cute::Shape<cute::_64, D, BN>,
                                         cute::Shape<BM, cute::Int<kD / kConsumerWarpgroups>, BN>>;
    using type = decltype(cute::make_tiled_mma(
        cute::GMMA::ss_op_selector<Element, Element, float, AtomShape, cute::GMMA::Major::K,
                                   cute::GMMA::Major::MN>(),
        std::conditional_t<kDqSplitM, WGsM, WGsN>{}));
  };
  template <int kUnused>
  struct DqMma<true, kUnused> {  // dQ^T = K^T dS^T: M = d split between the warpgroups
    using type = decltype(cute::make_tiled_mma(
        bwd_ss_op<Element, kBlockM, cute::GMMA::Major::MN, cute::GMMA::Major::K, kBlockN>(),
        WGsM{}));
  };
  // kDqThirds: one warpgroup's GMMAs, 64 d rows x kBlockM queries (its own chunk: MmadQ, TileDq)
  // and 64 x kBlockM / 2 (its half of chunk 2: MmadQHalf, TileDqHalf), K = keys. (Other tiles
  // leave the half unused: a 64 x 16 stand-in.)
  using BMHalf = cute::Int<kDqThirds ? kBlockM / 2 : 16>;
  using MmadQWhole = decltype(cute::make_tiled_mma(
      bwd_ss_op<Element, kBlockM, cute::GMMA::Major::MN, cute::GMMA::Major::K, kBlockN>()));
  using MmadQHalf = decltype(cute::make_tiled_mma(
      bwd_ss_op<Element, BMHalf::value, cute::GMMA::Major::MN, cute::GMMA::Major::K, kBlockN>()));
  using TileDqHalf = cute::Shape<cute::_64, BMHalf>;
  using MmadQ = std::conditional_t<kDqThirds, MmadQWhole, typename DqMma<kDqSwapAB>::type>;
  // The shape dQ's accumulator partitions: (query, d), or (d, query) when swapped (kDqThirds:
  // the warpgroup's own chunk).
  using TileDq =
      std::conditional_t<kDqThirds, cute::Shape<cute::_64, BM>,
                         std::conditional_t<kDqSwapAB, cute::Shape<D, BM>, cute::Shape<BM, D>>>;

  using SmemAtom = cute::GMMA::Layout_K_SW128_Atom<Element>;
  using SmemLayoutQ = decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<BM, D, Stages>{}));
  // Q^T(d, m, stage) = Q(m, d, stage); dO the same.
  using SmemLayoutQt = decltype(cute::composition(
      SmemLayoutQ{}, cute::make_ordered_layout(cute::Shape<D, BM, Stages>{},
                                               cute::Step<cute::_2, cute::_1, cute::_3>{})));
  using SmemLayoutK = decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<BN, D>{}));
  // dO and V: d_v columns.
  using SmemLayoutdO = decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<BM, Dv, Stages>{}));
  using SmemLayoutdOt = decltype(cute::composition(
      SmemLayoutdO{}, cute::make_ordered_layout(cute::Shape<Dv, BM, Stages>{},
                                                cute::Step<cute::_2, cute::_1, cute::_3>{})));
  using SmemLayoutV = decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<BN, Dv>{}));
  // kDqThirds: one 64-column chunk of K as K^T (the pointer picks the chunk), and rows [0,
  // kBlockM / 2) of one dS buffer (the pointer moves to the second half: 1024-byte aligned, so
  // the swizzle's phase holds).
  using SmemLayoutKtChunk = decltype(cute::composition(
      cute::tile_to_shape(SmemAtom{}, cute::Shape<BN, cute::_64>{}),
      cute::make_ordered_layout(cute::Shape<cute::_64, BN>{}, cute::Step<cute::_2, cute::_1>{})));
  using SmemLayoutdSHalf = decltype(cute::composition(
      cute::tile_to_shape(SmemAtom{}, cute::Shape<BM, BN>{}),
      cute::make_layout(cute::Shape<BMHalf, BN>{}, cute::make_stride(cute::_1{}, BM{}))));
  using SmemLayoutKt = decltype(cute::composition(
      SmemLayoutK{},
      cute::make_ordered_layout(cute::Shape<D, BN>{}, cute::Step<cute::_2, cute::_1>{})));
  using SmemLayoutdS =
      decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<BM, BN, cute::Int<kDsBuffers>>{}));
  // dS^T(key, query, buffer) = dS(query, key, buffer): the consumers' dS^T accumulators go there
  // with transposing stmatrix (4 per thread and visit for 64 x 64).
  using SmemLayoutdSt = decltype(cute::composition(
      SmemLayoutdS{}, cute::make_ordered_layout(cute::Shape<BN, BM, cute::Int<kDsBuffers>>{},
                                                cute::Step<cute::_2, cute::_1, cute::_3>{})));
  using SmemCopydS = decltype(cute::make_tiled_copy_C(
      cute::Copy_Atom<cute::SM90_U16x8_STSM_T, Element>{}, MmaSdP{}));

  // dQ of one visit in fragment order: warpgroup w's accumulator (kDqFrag floats a thread) at
  // [w][j][thread][4] for j < kDqFrag / 4, so that each thread stores float4s a warp writes as
  // 512 contiguous bytes (no bank conflict), and the half is one contiguous run for the bulk
  // reduce-add. dq_accum holds each query tile in the same order (bwd_dq_convert.cuh undoes it).
  static constexpr int kDqHalfFloats = kBlockM * kD / kConsumerWarpgroups;
  static constexpr int kDqFrag = kDqHalfFloats / 128;
  static_assert(kDqFrag % 4 == 0, "float4 stores of the dQ fragment");

  // The bias kernel's ring: one bias tile (kBlockM queries x kBlockN keys) a Q/dO stage, written
  // by TMA in 64-key boxes as dS's tile is laid out, [kBlockN / 64][kBlockM][64] with the
  // 128-byte swizzle, and read transposed (key, query) as S^T's accumulator holds it, with
  // ldmatrix.trans (the mirror of dS's stmatrix.trans).
  using SmemLayoutBias = decltype(cute::tile_to_shape(SmemAtom{}, cute::Shape<BM, BN, Stages>{}));
  using SmemLayoutBiasT = decltype(cute::composition(
      SmemLayoutBias{}, cute::make_ordered_layout(cute::Shape<BN, BM, Stages>{},
                                                  cute::Step<cute::_2, cute::_1, cute::_3>{})));
  using SmemCopyBias = decltype(cute::make_tiled_copy_C(
      cute::Copy_Atom<cute::SM75_U16x8_LDSM_T, Element>{}, MmaSdP{}));

  struct PlainStorage {
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>> q;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutdO>> d_o;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutK>> k;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutV>> v;
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutdS>> ds;
    alignas(128) float dq[kConsumerWarpgroups * kDqHalfFloats];
    alignas(16) float lse[kStages][kBlockM];
    alignas(16) float delta[kStages][kBlockM];
    alignas(8) uint64_t kv_full;
    uint64_t q_full[kStages], do_full[kStages], q_empty[kStages], do_empty[kStages];
    uint64_t dq_full[kConsumerWarpgroups], dq_empty[kConsumerWarpgroups];
    uint64_t dbias_turn;  // the bias kernel's, in the barriers' line: bwd_dbias_order.cuh
  };
  struct BiasStorage : PlainStorage {
    alignas(1024) cute::array_aligned<Element, cute::cosize_v<SmemLayoutBias>> bias;
  };
  using SharedStorage = std::conditional_t<kBias, BiasStorage, PlainStorage>;
  static constexpr int kSmemBytes = static_cast<int>(sizeof(SharedStorage));

  static constexpr uint32_t kQBytes = kBlockM * kD * sizeof(Element);
  static constexpr uint32_t kKBytes = kBlockN * kD * sizeof(Element);
  static constexpr uint32_t kDoBytes = kBlockM * kDv * sizeof(Element);
  static constexpr uint32_t kVBytes = kBlockN * kDv * sizeof(Element);
  static constexpr uint32_t kRowStatBytes = kBlockM * sizeof(float);
  static constexpr uint32_t kBiasBytes = kBias ? kBlockM * kBlockN * sizeof(Element) : 0;

  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per block");
};

// kDqThirds: the (query, d) of dQ fragment value i (of kDqFrag) of consumer thread ctid (both
// warpgroups, 0..255); the main kernel stores the values in this order and the dQ convert reads
// them back by it.
template <class T>
__device__ __forceinline__ cute::tuple<int, int> dq_third_coord(int ctid, int i) {
  using namespace cute;
  const int w = ctid / 128, t = ctid % 128;
  constexpr int kWhole = T::kBlockM * 64 / 128;  // the first GMMA's values a thread
  if (i < kWhole) {
    typename T::MmadQ mma;
    auto c = mma.get_thread_slice(t).partition_C(make_identity_tensor(typename T::TileDq{}));
    return make_tuple(get<1>(c(i)), 64 * w + get<0>(c(i)));
  }
  typename T::MmadQHalf mma;
  auto c = mma.get_thread_slice(t).partition_C(make_identity_tensor(typename T::TileDqHalf{}));
  return make_tuple(w * (T::kBlockM / 2) + get<1>(c(i - kWhole)), 128 + get<0>(c(i - kWhole)));
}

}  // namespace floe::detail::sm90
