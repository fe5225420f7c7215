#pragma once
// The fixed one-GPU-per-expert layout shared by static-ep, deepspeed and fastmoe (HarMoEny §V-A:
// DeepSpeed, FastMoE and FasterMoE place experts statically, round-robin or in contiguous blocks).
#include <string>
#include <utility>
#include <vector>

#include "models/model_spec.hpp"
#include "policies/expert_parallel.hpp"

namespace moesim {

/// Base for expert-parallel policies whose experts each live on one fixed GPU, chosen by the
/// `placement` option: sets the layout up and reports the weight memory it takes.
class StaticPlacementPolicy : public ExpertParallelPolicy {
 public:
  explicit StaticPlacementPolicy(std::string placement) : placement_name_(std::move(placement)) {}

  void setup(const PolicyContext& ctx) override {
    owner_ = static_owner(placement_name_, ctx.model.experts, ctx.cluster.num_gpus());
    placement_ = ExpertPlacement::from_owner(owner_, ctx.cluster.num_gpus());
  }

  std::vector<double> expert_memory_bytes(const PolicyContext& ctx) const override {
    std::vector<double> bytes(ctx.cluster.num_gpus(), 0.0);
    // The same layout holds in every MoE layer.
    const double per_layer = ctx.model.expert_bytes() * ctx.model.num_moe_layers();
    for (std::size_t g = 0; g < bytes.size(); ++g)
      bytes[g] = static_cast<double>(placement_.experts_on_gpu[g].size()) * per_layer;
    return bytes;
  }

 protected:
  std::string placement_name_;
  std::vector<int> owner_;  ///< GPU of each expert
  ExpertPlacement placement_;
};

}  // namespace moesim
