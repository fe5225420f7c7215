#pragma once
// Planning expert weight copies, shared by the policies that move or add expert replicas:
// which (expert, GPU) pairs a new placement adds, which GPU each copy comes from, and the base of
// policies that keep a static layout and add per-layer copies in buffers reused from layer to
// layer (moegps-dup, fastermoe; eplb uses the copy planning for its re-placements).
#include <string>
#include <utility>
#include <vector>

#include "policies/expert_parallel.hpp"

namespace moesim {

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
