#pragma once
// A node-aware (hierarchical) all-to-all, as GRACE-MoE implements its token dispatch (§5.1):
// "for tokens routed to multiple experts on the same device are transmitted only a single copy.
// Within the target device, tokens are distributed hierarchically: duplicated among activated
// experts if the target is a GPU, or first across GPUs in the node and then within each GPU if
// the target is a node." A token bound for GPUs of another node therefore crosses the node
// boundary once, to one of those GPUs (its gateway), which forwards it to the others over the
// node's own links; the combine runs the same path backwards (partial outputs gather on the
// gateway, then cross back once). Any expert-parallel policy may use it (Dispatch::forward).
#include <cstdint>
#include <span>
#include <vector>

#include "hardware/cluster.hpp"
#include "sim/task_graph.hpp"

namespace moesim {

/// Rows of one layer's token dispatch, built token by token: each token reaches each destination
/// GPU once, and, when `node_level`, each other node once.
class TokenDispatchRows {
 public:
  using Matrix = std::vector<std::vector<std::int64_t>>;

  /// `node_level` false: one row per (token, destination GPU), sent directly (a flat all-to-all
  /// that deduplicates per GPU).
  TokenDispatchRows(const Cluster& cluster, bool node_level);

  /// A token whose home is `home` and whose selections run on `dests`, in selection order
  /// (repeats allowed: one row per distinct GPU). On another node, the gateway is the GPU of the
  /// token's first selection there.
  void add_token(int home, std::span<const int> dests);

  /// first[src][dst]: rows of the first stage: home to its node's destinations (the diagonal:
  /// rows that stay on their home GPU and move nowhere) and to each other node's gateway.
  const Matrix& first() const { return first_; }
  /// second[gateway][dst]: rows the gateways forward inside their node. All zero unless node_level.
  const Matrix& second() const { return second_; }
  bool has_second_stage() const { return forwarded_ > 0; }

 private:
  const Cluster& cluster_;
  bool node_level_;
  Matrix first_, second_;
  std::int64_t forwarded_ = 0;
  std::vector<int> seen_;  ///< this token's distinct destination GPUs so far
};

/// All-to-all in stages: every stage's flows go GPU to GPU as in add_all_to_all; a GPU enters
/// stage s + 1 when its stage s call returns (the gateway forwards what it received). `stages[s]`
/// is bytes[src][dst]. Returns, per GPU, the join of its last stage. A single stage is exactly
/// add_all_to_all.
std::vector<TaskId> add_staged_all_to_all(TaskGraph& g, const Cluster& c, const std::vector<int>& gpus,
                                          std::span<const std::vector<std::vector<double>>> stages, Phase phase,
                                          int layer, const std::vector<TaskId>& start);

}  // namespace moesim
