#pragma once
// Expert parallelism with barrier all-to-all: the shared mechanics of token-dispatch policies.
// Subclasses fill one hook, `dispatch`, deciding which GPU computes each token selection; this
// base turns the decision into the scatter all-to-all, grouped expert GEMMs, the gather
// all-to-all and the merge on each token's home GPU (HarMoEny §II, Fig. 3).
#include "policies/policy.hpp"

namespace moesim {

/// A policy's decision for one layer.
struct Dispatch {
  /// send[src][dst]: token selections whose hidden state moves from GPU src to GPU dst.
  std::vector<std::vector<std::int64_t>> send;
  /// load[gpu][expert]: selections GPU `gpu` computes for `expert`.
  std::vector<std::vector<std::int64_t>> load;
  std::int64_t dropped = 0;

  Dispatch(int gpus, int experts)
      : send(gpus, std::vector<std::int64_t>(gpus, 0)), load(gpus, std::vector<std::int64_t>(experts, 0)) {}
};

/// Base for policies that move tokens to experts over a barrier all-to-all.
class ExpertParallelPolicy : public Policy {
 public:
  MoeLayerOutput build_moe_layer(TaskGraph& plan, const PolicyContext& ctx,
                                 const MoeLayerInput& in) override;

 protected:
  /// Which GPU computes each selection of this layer.
  virtual Dispatch dispatch(const PolicyContext& ctx, const MoeLayerInput& in) = 0;
};

}  // namespace moesim
