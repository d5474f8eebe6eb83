// sm80 planning: what is this architecture's own (the target check, the engine's name in
// messages); the rules every tensor-core engine shares live in engines/tensor_core_rules.h. Host
// code.
#pragma once

#include <string>

#include "engines/sm80/head_dim_tile.h"
#include "engines/tensor_core_rules.h"
#include "floe/target.h"

namespace floe::detail::sm80 {

inline constexpr const char* kEngine = "sm80";

// Empty when sm80 serves the target; else why not.
std::string check_target(const Target& target);

using tensor_core::bias_pointer_allows_vec;
using tensor_core::bias_strides_allow_vec;
using tensor_core::bias_strides_of;
using tensor_core::check_head_dims;
using tensor_core::check_kernel;
using tensor_core::check_operands;
using tensor_core::fill_shared;
using tensor_core::kInt32Max;
using tensor_core::launch_status;
using tensor_core::score_mod_of;
using tensor_core::set_shared_pointers;
using tensor_core::strides_of;
using tensor_core::TensorCoreLaunchPlan;

// What a direction would run: the tile (FwdTile or BwdTile), the score-mod kind of its kernel
// (kernels/score_mod_kind.h), and the compiled kernel (FwdKernel or BwdKernel).
template <class Kernel, class Tile>
struct TileChoice {
  Tile tile = Tile::d128;
  kernels::ScoreMod score_mod = kernels::ScoreMod::plain;
  const Kernel* kernel = nullptr;
};

// Both directions' first rules: the target and the head dims; then the tile (`tile_for`: the
// direction's tile of a head-dim class for the target's shared memory per block) and the
// score-mod kind. Empty, or why not.
template <class Kernel, class Tile, class TileFor>
std::string choose_tile(const Facts& f, const Target& target, TileFor tile_for,
                        TileChoice<Kernel, Tile>& c) {
  if (std::string why = check_target(target); !why.empty()) return why;
  if (std::string why = check_head_dims(kEngine, f); !why.empty()) return why;
  c.tile = tile_for(head_dim_tile_for(f.d_qk, f.d_v), target.smem_per_block_optin);
  c.score_mod = score_mod_of(f);
  return "";
}

}  // namespace floe::detail::sm80
