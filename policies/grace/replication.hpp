#pragma once
// GRACE-MoE's dynamic replication (§4.2, Eq. 2) and routing among replicas (§4.3, Eq. 3,
// Algorithms 4-5, App. A.3), as functions of a layer's profiled loads; the policy applies them.
#include <cstdint>
#include <map>
#include <vector>

#include "core/rng.hpp"

namespace moesim {

/// Eq. 2: n_replica = min(max(1, ⌊ρ⌋), n_gpu - 1), ρ = W_max / W̄.
int replica_count(double rho, int gpus);

/// What to replicate in one layer and where.
struct ReplicationPlan {
  int heaviest_gpu = -1;
  int replicas = 0;                  ///< copies of each hot expert (besides its primary)
  std::vector<int> hot_experts;      ///< of the heaviest group, by load, descending
  std::vector<int> target_gpus;      ///< the `replicas` least loaded GPUs
  std::vector<double> predicted_load;  ///< per GPU after replication (Eq. 3)
};

/// §4.2: the heaviest GPU group's hot experts — the fewest of its experts, by load descending,
/// whose cumulative load reaches W_max · n/(1 + n) — copied to the n least loaded GPUs; n from
/// Eq. 2 (`fixed`: n = 1, the paper's fixed-replica ablation). `expert_load[e]` are the profiled
/// token counts and `gpu_of_expert[e]` the grouping. Eq. 3 predicts the loads after: the hot
/// experts' load W_r is split evenly over their n + 1 instances, W_p = W_r/(n + 1) each (the
/// paper prints W_max/(n + 1), which would not conserve the load; we read it as W_r), so
/// W'_max = W_max - W_r + W_p and W'_i = W_i + W_p on each target.
ReplicationPlan plan_replication(const std::vector<double>& expert_load, const std::vector<int>& gpu_of_expert, int gpus,
                                 bool fixed);

/// Algorithm 4: a GPU drawn with probability proportional to its weight (first key on ties of
/// the draw; weights must be positive).
int choose_by_polling_weight(const std::map<int, double>& weights, Rng& rng);

/// Algorithm 5: the token's own GPU if it holds a replica, else a replica on its node by weight,
/// else any replica by weight. `weights` maps every replica GPU to its polling weight.
int topology_aware_route(const std::map<int, double>& weights, int token_gpu, const std::vector<int>& node_of_gpu,
                         Rng& rng);

}  // namespace moesim
