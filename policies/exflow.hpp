#pragma once
// The `exflow` policy (ExFlow as HarMoEny §III, §V-A and §V-C2 describe it) and its placement
// solver, exposed so that tests can check the solver on hand-made profiles.
#include <Eigen/Dense>
#include <deque>
#include <string>
#include <vector>

#include "policies/expert_parallel.hpp"

namespace moesim {

/// Routing statistics of a window of batches, summed over its batches.
struct ExflowProfile {
  /// Per MoE layer, E x G: selections of expert e made by tokens whose home GPU is g. Row sums
  /// are the experts' loads; the entry at (e, owner) is the traffic saved by locality to home.
  std::vector<Eigen::MatrixXd> home;
  /// Per pair of consecutive MoE layers (l, l+1), E x E: inter-layer affinity A_l(e, e'), the
  /// tokens that select e in layer l and e' in layer l+1, counting all top-k x top-k pairs, divided
  /// by layer l+1's top_k so that a row sums to e's selections (traffic is in selections).
  std::vector<Eigen::MatrixXd> affinity;
  int batches = 0;  ///< batches added

  ExflowProfile(int moe_layers, int experts, int gpus);
  /// Adds one batch: `routing[l]` for every MoE layer, and each token's home GPU.
  void add_batch(const std::vector<LayerRouting>& routing, const std::vector<int>& token_home);
};

/// Weights of the solver's objective (see exflow.cpp).
struct ExflowWeights {
  double traffic = 1.0;   ///< λ: cross-GPU selections per GPU against the max GPU load
  double home = 1.0;      ///< weight of traffic to and from the tokens' home GPUs
  double affinity = 1.0;  ///< weight of traffic between consecutive MoE layers (ExFlow's affinity)
  double move = 0.0;      ///< re-solves: per expert moved, in selections per profiled batch
};

/// Owner GPU of every expert, per MoE layer: owner[moe_layer][expert].
using ExflowPlacement = std::vector<std::vector<int>>;

/// Expert slots per GPU: the counts of the static contiguous split (expert e on GPU ⌊e·G/E⌋), so
/// E/G each when G divides E and otherwise ⌊E/G⌋ or ⌈E/G⌉, as static-ep's default layout.
std::vector<int> exflow_slots(int experts, int gpus, const std::string& placement = "contiguous");

/// The objective's parts for one placement.
struct ExflowCost {
  double load = 0.0;     ///< Σ over layers of (max GPU load + mean overload above the mean)
  double traffic = 0.0;  ///< weighted cross-GPU selections (home + affinity), summed over layers
  int moved = 0;         ///< experts not on the GPU `previous` had them on
  double total = 0.0;    ///< load + λ · traffic / G + w.move · batches · moved
};
ExflowCost exflow_cost(const ExflowProfile& p, const ExflowPlacement& owner, const ExflowWeights& w,
                       const ExflowPlacement* previous = nullptr);

/// Greedy construction plus pairwise-swap local search (deterministic) of the placement that
/// minimises exflow_cost with exactly `slots[g]` experts on GPU g in every layer. A re-solve
/// passes the placement in force as `previous` (see exflow.cpp).
ExflowPlacement exflow_place(const ExflowProfile& p, const std::vector<int>& slots, const ExflowWeights& w,
                             const ExflowPlacement* previous = nullptr);

/// `placement` with its GPUs renamed by one permutation for all layers, which keeps the load and
/// affinity terms, so that as many experts as possible stay on the GPU `previous` had them on
/// (greedy matching on shared experts, among GPUs with equal slot counts).
ExflowPlacement exflow_keep_in_place(const ExflowPlacement& placement, const ExflowPlacement& previous,
                                     const std::vector<int>& slots);

/// The registered `exflow` policy: a profiled static placement, optionally re-solved.
class ExflowPolicy final : public ExpertParallelPolicy {
 public:
  /// Re-solves keep the routing they observed token by token (inter-layer affinity needs tokens).
  bool accepts_counts() const override { return resolve_every_ == 0; }
  explicit ExflowPolicy(const ParamSet& p)
      : placement_(p.get_string("placement")),
        profile_batches_(static_cast<int>(p.get_int("profile_batches"))),
        resolve_every_(static_cast<int>(p.get_int("resolve_every"))),
        solve_ms_(p.get_float("solve_ms")),
        weights_{p.get_float("traffic_weight"), p.get_float("home_weight"), p.get_float("affinity_weight"),
                 p.get_float("move_weight")} {}
  void setup(const PolicyContext& ctx) override;
  /// The slot counts of the static `placement` in every MoE layer, whatever moved.
  std::vector<double> expert_memory_bytes(const PolicyContext& ctx) const override {
    std::vector<double> bytes;
    for (const int s : exflow_slots(ctx.model.experts, ctx.cluster.num_gpus(), placement_))
      bytes.push_back(static_cast<double>(s) * ctx.model.expert_bytes() * ctx.model.num_moe_layers());
    return bytes;
  }
  /// The placement in force (after the most recent dispatch).
  const ExflowPlacement& placement() const { return owner_; }
  /// Re-solves applied so far (the initial solve not counted).
  int resolves() const { return resolves_; }

 protected:
  Dispatch dispatch(const PolicyContext& ctx, const MoeLayerInput& in) override;
  std::vector<TaskId> before_scatter(TaskGraph& plan, const PolicyContext& ctx, const MoeLayerInput& in,
                                     TaskId all_routed) override;

 private:
  /// Records the finished batch's routing and applies a re-solve when one is due.
  void start_batch(const PolicyContext& ctx, const MoeLayerInput& in);

  std::string placement_;  ///< the static layout before (or without) a profile
  int profile_batches_;
  int resolve_every_;
  double solve_ms_;
  ExflowWeights weights_;
  std::vector<int> slots_;
  ExflowPlacement owner_;
  ExflowPlacement previous_;     ///< placement before the re-solve this batch applies (else empty)
  int current_batch_ = -1;
  int served_ = 0;               ///< batches served since the placement was last solved
  int resolves_ = 0;
  std::vector<LayerRouting> current_;          ///< routing of the batch in progress
  std::deque<std::vector<LayerRouting>> seen_;  ///< the last profile_batches complete batches
};

}  // namespace moesim
