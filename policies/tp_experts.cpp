// tp-experts: every expert tensor-parallel over all GPUs (AMoE §2.1, MoE-GPS §2), Megatron style.
// The expert slices and their compute are MoEShard's (each GPU: a column slice of W_in and a row
// slice of W_out of every expert), but the tokens move with the collectives of tensor
// parallelism: attention here is data-parallel (each GPU holds its home tokens), so a ring
// all-gather gives every GPU every token, and a ring all-reduce of the full output
// (tokens x hidden) sums the partial outputs, after which each GPU keeps its home rows. Before
// the all-gather, the same small routing all-gather as MoEShard's metadata exchange (the base
// class's) tells every GPU which gathered rows go to which expert slice.
//
// The all-reduce moves 2(G-1)/G of the output per GPU; a reduce-scatter (each GPU receiving only
// its home rows, summed) would move half that, (G-1)/G, the same as MoEShard's gather. We model
// the all-reduce because that is what tensor-parallel experts are described with in AMoE §2.1
// and MoE-GPS §2 (and what Megatron-style TP runs when the next layer needs the full output);
// `moeshard` is the variant with the cheaper return trip.
#include "policies/sharded_experts.hpp"

#include "hardware/collectives.hpp"
#include "models/operators.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

/// Tensor-parallel experts: ring all-gather of the hidden states, ring all-reduce of the output.
class TpExpertsPolicy final : public ShardedExpertsPolicy {
 public:
  explicit TpExpertsPolicy(const ParamSet& p) : ShardedExpertsPolicy(p.get_bool("fused")) {}

 protected:
  // NCCL all-gather takes equal contributions: every GPU's share is padded to the largest home
  // block (equal when the batch divides evenly over the GPUs).
  std::vector<TaskId> distribute_tokens(TaskGraph& plan, const PolicyContext& ctx, const MoeLayerInput& in,
                                        TaskId start) override {
    const int G = ctx.cluster.num_gpus();
    const double per_gpu = static_cast<double>(max_home_tokens(in)) * token_bytes(ctx.model);
    const TaskId dep[] = {start};
    const TaskId gathered = add_ring_all_gather(plan, ctx.cluster, all_gpus(G), per_gpu, phase::kDispatch, in.layer, dep);
    return std::vector<TaskId>(static_cast<std::size_t>(G), gathered);
  }

  // The all-reduce buffer is the all-gathered (padded) token block's output, one row per token:
  // top-k partials were already combined on each GPU.
  std::vector<TaskId> collect_outputs(TaskGraph& plan, const PolicyContext& ctx, const MoeLayerInput& in,
                                      TaskId computed) override {
    const int G = ctx.cluster.num_gpus();
    const double bytes = static_cast<double>(G) * static_cast<double>(max_home_tokens(in)) * token_bytes(ctx.model);
    const TaskId dep[] = {computed};
    const TaskId reduced = add_ring_all_reduce(plan, ctx.cluster, all_gpus(G), bytes, phase::kCombine, in.layer, dep);
    return std::vector<TaskId>(static_cast<std::size_t>(G), reduced);
  }

  // The all-reduce has already summed the G partials.
  int partials_at_home(int /*gpus*/) const override { return 1; }
};

const bool registered = policies().add(
    "tp-experts",
    "every expert tensor-parallel over all GPUs: ring all-gather of tokens, sharded experts, ring all-reduce",
    PolicyInfo{{fused_param()}, [](const ParamSet& p) { return std::make_unique<TpExpertsPolicy>(p); }, {},
               PolicyCapabilities{.expert_parallel = false}});

}  // namespace
}  // namespace moesim
