// Shared mechanics of the sharded-expert policies (moeshard, tp-experts): see sharded_experts.hpp.
#include "policies/sharded_experts.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "hardware/collectives.hpp"
#include "models/operators.hpp"
#include "core/diagnostics.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

double d(std::int64_t v) { return static_cast<double>(v); }

/// Bytes of one routing index on the wire (PyTorch's top-k indices are int64).
constexpr double kIndexBytes = 8.0;

/// What each GPU contributes to the metadata all-gather. MoEShard §3.1 step 2: its count of
/// tokens per expert (|E| counters), enough for a receiver to split the expert-sorted token
/// block it gets (the paper's Switch models are top-1, and the home GPU applies the gate).
/// With top_k > 1 a GPU must reduce a token's k partial outputs, gate-weighted, before sending
/// one row back, so it also needs every token's k expert ids and gates: an extension of ours.
double metadata_bytes_per_gpu(const ModelSpec& m, std::int64_t max_home) {
  double bytes = d(m.experts) * kIndexBytes;
  if (m.top_k > 1) bytes += d(max_home) * m.top_k * (kIndexBytes + dtype_bytes(m.dtype));
  return bytes;
}

/// The merge on a home GPU: the sum of a token's `partials` partial outputs (MoEShard §3.1
/// step 5, "pointwise aggregated"), then the usual gate-weighted sum and residual. With
/// top_k > 1 the gate-weighted top-k sum already ran on the computing GPUs, so only the
/// residual add of combine_ops remains.
std::vector<Op> merge_ops(const ModelSpec& m, std::int64_t tokens, int partials) {
  std::vector<Op> ops;
  if (partials > 1)
    ops.push_back(make_elementwise("combine.shard_sum", d(partials) * d(tokens) * d(m.hidden), m.dtype));
  for (Op& op : combine_ops(m, tokens))
    if (m.top_k == 1 || std::string(op.name) != "combine.weighted_sum") ops.push_back(std::move(op));
  return ops;
}

}  // namespace

ParamSpec fused_param() {
  return ParamSpec{"fused", ParamType::kBool, "true", "",
                   "true: one grouped kernel per projection over every expert slice (MoEShard §3.3 with "
                   "MegaBlocks); false: one kernel per expert slice and projection, each paying a launch",
                   {}, {}, {}};
}

std::int64_t ShardedExpertsPolicy::max_home_tokens(const MoeLayerInput& in) {
  return in.home_tokens.empty() ? 0 : *std::max_element(in.home_tokens.begin(), in.home_tokens.end());
}

std::vector<int> ShardedExpertsPolicy::all_gpus(int G) {
  std::vector<int> v(static_cast<std::size_t>(G));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

void ShardedExpertsPolicy::setup(const PolicyContext& ctx) {
  // MoEShard §2 assumes the slice width divides evenly; we round up (ceil(ffn / G) columns, as
  // sharded_expert_ops does), but a GPU without a single column would hold nothing.
  const int G = ctx.cluster.num_gpus();
  if (ctx.model.experts > 0 && ctx.model.expert_ffn < G)  // a dense model has no expert to shard
    throw InputError(SourceLocation{}, "expert sharding needs at least one FFN column per GPU: expert_ffn (" +
                                           std::to_string(ctx.model.expert_ffn) + ") < GPUs (" + std::to_string(G) +
                                           ")");
}

std::int64_t ShardedExpertsPolicy::expert_intermediate_width(const PolicyContext& ctx) const {
  const std::int64_t G = ctx.cluster.num_gpus();
  return (ctx.model.expert_ffn + G - 1) / G * (ctx.model.activation == Activation::kSwiGlu ? 2 : 1);
}

std::vector<double> ShardedExpertsPolicy::expert_memory_bytes(const PolicyContext& ctx) const {
  const ModelSpec& m = ctx.model;
  const int G = ctx.cluster.num_gpus();
  // An expert's parameters are its two projections; a GPU holds ceil(ffn/G) of W_in's columns
  // and of W_out's rows, of every expert (MoEShard §3.2: "each GPU holds one shard of all
  // experts"), i.e. 1/G of all routed experts when G divides the FFN width.
  if (m.experts == 0 || m.expert_ffn == 0) return std::vector<double>(static_cast<std::size_t>(G), 0.0);  // dense
  const double width = d((m.expert_ffn + G - 1) / G) / d(m.expert_ffn);
  const double bytes = m.expert_bytes() * width * m.experts * m.num_moe_layers();
  return std::vector<double>(static_cast<std::size_t>(G), bytes);
}

MoeLayerOutput ShardedExpertsPolicy::build_moe_layer(TaskGraph& plan, const PolicyContext& ctx,
                                                     const MoeLayerInput& in) {
  const Cluster& cl = ctx.cluster;
  const ModelSpec& m = ctx.model;
  const LayerRouting& r = *in.routing;
  const int G = cl.num_gpus();
  const int L = in.layer;
  const std::vector<int> gpus = all_gpus(G);

  // Shared experts see every home token and need no communication: they overlap the rest (as in
  // expert parallelism; only routed experts are sharded).
  std::vector<TaskId> shared(G, 0);
  std::vector<char> has_shared(G, 0);
  for (int g = 0; g < G; ++g) {
    auto ops = shared_expert_ops(m, in.home_tokens[g]);
    if (ops.empty()) continue;
    const TaskId dep[] = {in.ready[g]};
    shared[g] = plan.compute(g, phase::kExperts, L, std::move(ops), dep);
    has_shared[g] = 1;
  }

  // Metadata exchange (MoEShard §3.1 step 2) as a ring all-gather: a collective, so it starts
  // when every GPU has routed.
  const TaskId all_routed = plan.join(in.ready, phase::kDispatch, L);
  const TaskId routed_dep[] = {all_routed};
  const TaskId meta = add_ring_all_gather(plan, cl, gpus, metadata_bytes_per_gpu(m, max_home_tokens(in)),
                                          phase::kCollective, L, routed_dep);

  const std::vector<TaskId> received = distribute_tokens(plan, ctx, in, meta);

  // Every GPU computes its slice of every expert over that expert's selections from all GPUs
  // (§3.1 step 4, §3.3: tokens of one expert from all GPUs are concatenated, so kernels do not
  // grow with G). Same ops on every GPU, whatever the skew.
  std::vector<Op> expert_work = sharded_expert_ops(m, r.expert_counts(), G, fused_);
  // With top_k > 1 a token's k partial rows are gate-weighted and summed here, so that each
  // token crosses the network once on the way back, as it did on the way out.
  if (m.top_k > 1 && !expert_work.empty())
    expert_work.push_back(
        make_elementwise("expert_shard.topk_sum", d(r.num_tokens) * m.top_k * d(m.hidden), m.dtype, 2.0));
  std::vector<TaskId> computed(G);
  for (int g = 0; g < G; ++g) {
    const TaskId dep[] = {received[g]};
    computed[g] = expert_work.empty() ? plan.join(dep, phase::kExperts, L)
                                      : plan.compute(g, phase::kExperts, L, expert_work, dep);
  }

  // The return trip is a collective too: it starts when every GPU has computed (as the gather
  // of expert parallelism; with identical work the barrier costs nothing here).
  const std::vector<TaskId> home = collect_outputs(plan, ctx, in, plan.join(computed, phase::kCombine, L));

  MoeLayerOutput out;
  // Every GPU computes (its slice of) every selection; nothing is dropped (MoEShard is dropless).
  out.gpu_tokens.assign(G, r.num_tokens * r.top_k);
  out.tokens_dropped = 0;
  out.done.resize(G);
  const int partials = partials_at_home(G);
  for (int g = 0; g < G; ++g) {
    std::vector<TaskId> deps{home[g]};
    if (has_shared[g]) deps.push_back(shared[g]);
    out.done[g] = in.home_tokens[g] > 0 ? plan.compute(g, phase::kMerge, L, merge_ops(m, in.home_tokens[g], partials), deps)
                                        : plan.join(deps, phase::kMerge, L);
  }
  return out;
}

}  // namespace moesim
