#pragma once
// Expert duplication, usable on its own: MoE-GPS Algorithm 1 (§3.1), which copies experts from
// overloaded to underloaded GPUs until per-GPU token loads are balanced, and the weight copies
// that bring a new placement into being. The `moegps-dup` policy feeds Algorithm 1 the map a
// layer's forecast predicts (prediction_dispatch.hpp, MoE-GPS §3.2): per-selection experts, or
// per-expert shares; with no forecast it cannot act ahead of routing and is static-ep.
#include <cstdint>
#include <vector>

#include "policies/expert_copies.hpp"

namespace moesim {

/// What Algorithm 1 returns: the balanced placement P, the dispatch d and the copies it made.
struct Duplication {
  std::vector<int> gpu_of_item;                 ///< d: the GPU that computes each item
  std::vector<std::vector<int>> gpus_of_expert; ///< P after duplication (initial hosts first)
  std::vector<WeightCopy> copies;               ///< each added (e, g), in the order made
  std::vector<std::int64_t> gpu_load;           ///< L_g at the end
};

/// MoE-GPS Algorithm 1. `item_expert` is the token-expert map f, one item per top-k selection;
/// `placement[e]` the GPUs initially hosting expert e (P, at least one each); `memory_bytes[g]`
/// the bytes M_g GPU g may spend on copies (its size is the GPU count); `expert_bytes` params(e);
/// `max_copies` C_max, counting every host of an expert including its initial ones.
/// Where the pseudocode is silent: tokens only move to a GPU that holds their expert, and when
/// the heaviest expert e* on g_h cannot be copied to g_c, the next-heaviest is tried; the loop
/// ends when no expert on g_h can move to g_c (see moegps_dup.cpp).
Duplication duplicate_experts(const std::vector<std::int32_t>& item_expert,
                              const std::vector<std::vector<int>>& placement, std::vector<double> memory_bytes,
                              double expert_bytes, int max_copies);

}  // namespace moesim
