#pragma once
// Expert duplication, usable on its own: MoE-GPS Algorithm 1 (§3.1), which copies experts from
// overloaded to underloaded GPUs until per-GPU token loads are balanced, and the weight copies
// that bring a new placement into being. The `moegps-dup` policy feeds Algorithm 1 the batch's
// true routing (an oracle); expert-load predictors can feed it a predicted token→expert map.
//
// Also the base shared by the policies that keep a static layout and add per-layer expert copies
// in buffers reused from layer to layer (moegps-dup, fastermoe).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "policies/expert_parallel.hpp"

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

/// The (expert, GPU) pairs hosted in `after` but not in `before`, by expert then GPU.
std::vector<std::pair<int, int>> new_hosts(const std::vector<std::vector<int>>& before,
                                           const std::vector<std::vector<int>>& after);

/// One weight copy per pair of `added`, in that order, each from a GPU that hosted the expert in
/// `before`: one that still hosts it in `after` if any (its weights are not being overwritten),
/// then the one sending fewest copies so far (spreading copy-engine load), then the lowest index.
/// Source endpoints are GPU indices (Cluster::gpu_endpoint(g) == g).
std::vector<WeightCopy> weight_copies(const std::vector<std::pair<int, int>>& added,
                                      const std::vector<std::vector<int>>& before,
                                      const std::vector<std::vector<int>>& after);

/// Base of policies that keep a static layout (the `placement` option) and add, per layer,
/// expert copies into buffers reused from layer to layer: the owners, the per-GPU memory
/// headroom left by the static layout (measured in setup), and the largest per-layer copy
/// buffer seen, which `expert_memory_bytes` adds to the static experts.
class StaticLayoutWithCopies : public ExpertParallelPolicy {
 public:
  explicit StaticLayoutWithCopies(std::string placement) : placement_name_(std::move(placement)) {}

  void setup(const PolicyContext& ctx) override;
  std::vector<double> expert_memory_bytes(const PolicyContext& ctx) const override;

 protected:
  const std::vector<int>& owner() const { return owner_; }
  const ExpertPlacement& placement() const { return placement_; }
  /// Bytes per GPU free for one layer's copies once the static layout, KV cache and activations fit.
  const std::vector<double>& headroom() const { return headroom_; }
  /// Records one layer's copies, so that memory accounts for the largest buffer any layer needed.
  void note_copies(const std::vector<WeightCopy>& copies);

 private:
  std::string placement_name_;
  std::vector<int> owner_;
  ExpertPlacement placement_;
  std::vector<double> headroom_;
  std::vector<int> max_buffers_;  ///< per GPU: most copies received in one layer
};

}  // namespace moesim
