// moeshard: expert tensor sharding for perfect load balance (MoEShard §3). Every GPU holds a
// column slice of each expert's W_in and a row slice of its W_out (§3.2), receives *every* token
// (§3.1 step 3), computes its slice of every selection (step 4) and sends each token's partial
// output back to the token's home GPU (step 5), where the G partials are summed. Its expert
// compute is identical on every GPU under any routing skew; the price is that every token
// crosses to every GPU, (G-1)/G of all hidden states per GPU instead of a skew-dependent share.
#include "policies/sharded_experts.hpp"

#include "hardware/collectives.hpp"
#include "models/operators.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

/// MoEShard: all-to-all of every token to every GPU and of the partial outputs back (§3.1).
class MoeShardPolicy final : public ShardedExpertsPolicy {
 public:
  explicit MoeShardPolicy(const ParamSet& p) : ShardedExpertsPolicy(p.get_bool("fused")) {}

 protected:
  // Step 3: GPU s sends all its home tokens to every other GPU, each token once whatever top_k
  // (the receiver knows the token's experts from the metadata). §3.1's example: a GPU holding
  // b = 250 sequences of s = 120 tokens (h = 768, fp32) sends its whole 88 MiB input to each peer.
  std::vector<TaskId> distribute_tokens(TaskGraph& plan, const PolicyContext& ctx, const MoeLayerInput& in,
                                        TaskId start) override {
    const int G = ctx.cluster.num_gpus();
    return add_all_to_all(plan, ctx.cluster, all_gpus(G), home_rows_to_peers(ctx, in, /*to_home=*/false),
                          phase::kDispatch, in.layer, std::vector<TaskId>(G, start));
  }

  // Step 5: GPU t returns one partial row per token to the token's home GPU (top-k partials were
  // already combined on t), the same volume as step 3 in the other direction.
  std::vector<TaskId> collect_outputs(TaskGraph& plan, const PolicyContext& ctx, const MoeLayerInput& in,
                                      TaskId computed) override {
    const int G = ctx.cluster.num_gpus();
    return add_all_to_all(plan, ctx.cluster, all_gpus(G), home_rows_to_peers(ctx, in, /*to_home=*/true),
                          phase::kCombine, in.layer, std::vector<TaskId>(G, computed));
  }

  // Each home GPU receives G-1 partials and holds its own: it sums G of them.
  int partials_at_home(int gpus) const override { return gpus; }

 private:
  /// bytes[s][t] of an all-to-all where every GPU exchanges one hidden-state row per home token
  /// with every other GPU: from home to peers (scatter) or from peers to home (gather).
  static std::vector<std::vector<double>> home_rows_to_peers(const PolicyContext& ctx, const MoeLayerInput& in,
                                                             bool to_home) {
    const int G = ctx.cluster.num_gpus();
    const double tb = token_bytes(ctx.model);
    std::vector<std::vector<double>> bytes(G, std::vector<double>(G, 0.0));
    for (int s = 0; s < G; ++s)
      for (int t = 0; t < G; ++t)
        if (s != t) bytes[s][t] = static_cast<double>(in.home_tokens[to_home ? t : s]) * tb;
    return bytes;
  }
};

const bool registered = policies().add(
    "moeshard",
    "MoEShard: every expert column/row-sharded over all GPUs, all tokens to all GPUs, dropless and balanced",
    PolicyInfo{{fused_param()}, [](const ParamSet& p) { return std::make_unique<MoeShardPolicy>(p); }});

}  // namespace
}  // namespace moesim
