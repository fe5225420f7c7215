#pragma once
// Expert tensor sharding over all GPUs: the shared mechanics of `moeshard` (MoEShard §3) and
// `tp-experts` (AMoE §2.1, MoE-GPS §2). Every GPU holds a 1/G slice of every expert, W_in by
// columns and W_out by rows (MoEShard §3.2), so a GPU can push any token through its slice with no
// synchronisation between the two projections and produce a partial output of full hidden width;
// the G partials of a token sum to the expert's output. Every GPU therefore sees every token and
// computes its slice of every selection: its expert work is identical whatever the routing skew,
// which is the whole point (MoEShard §1, §3). Subclasses pick the collectives that bring every
// token to every GPU and the partial outputs back to the tokens' home GPUs.
#include <cstdint>
#include <vector>

#include "policies/policy.hpp"

namespace moesim {

/// Base of policies that shard every expert over all GPUs and send every token to every GPU.
/// Per MoE layer: shared experts on the home GPU (overlapping the rest), a metadata all-gather,
/// `distribute_tokens`, the sharded expert compute, `collect_outputs`, the merge at home.
class ShardedExpertsPolicy : public Policy {
 public:
  bool accepts_counts() const override { return true; }
  /// `fused`: one grouped kernel per projection over all expert slices (MoEShard §3.3 with
  /// MegaBlocks) rather than one kernel per expert slice and projection.
  explicit ShardedExpertsPolicy(bool fused) : fused_(fused) {}

  void setup(const PolicyContext& ctx) override;
  MoeLayerOutput build_moe_layer(TaskGraph& plan, const PolicyContext& ctx, const MoeLayerInput& in) override;
  /// Each GPU: its slice of every expert of every MoE layer (1/G of all routed experts).
  std::vector<double> expert_memory_bytes(const PolicyContext& ctx) const override;
  /// Each GPU holds its ceil(ffn / G) slice of every selection's intermediate.
  std::int64_t expert_intermediate_width(const PolicyContext& ctx) const override;

 protected:
  /// Adds the collective that gives every GPU every token's hidden state, started once `start`
  /// (the metadata exchange) is done. Returns, per GPU, when it holds all tokens.
  virtual std::vector<TaskId> distribute_tokens(TaskGraph& plan, const PolicyContext& ctx, const MoeLayerInput& in,
                                                TaskId start) = 0;
  /// Adds the collective that brings the partial outputs (one row per token: a GPU reduces a
  /// token's top-k partials before sending) to the home GPUs, started once every GPU has
  /// computed (`computed`). Returns, per GPU, when its home tokens' partials have arrived.
  virtual std::vector<TaskId> collect_outputs(TaskGraph& plan, const PolicyContext& ctx, const MoeLayerInput& in,
                                              TaskId computed) = 0;
  /// Partial outputs per token the home GPU still has to add up once `collect_outputs` is done
  /// (G after an all-to-all of partials; 1 after an all-reduce, which sums on the way).
  virtual int partials_at_home(int gpus) const = 0;

  /// Largest number of home tokens on any GPU: what a collective that needs equal-sized
  /// contributions (NCCL all-gather, all-reduce) pads every GPU's share to.
  static std::int64_t max_home_tokens(const MoeLayerInput& in);
  /// GPUs 0..G-1, the group every collective of these policies spans.
  static std::vector<int> all_gpus(int G);

 private:
  bool fused_;
};

/// The `fused` option both sharded policies declare.
ParamSpec fused_param();

}  // namespace moesim
