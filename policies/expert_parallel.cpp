#include "policies/expert_parallel.hpp"

#include "hardware/collectives.hpp"
#include "models/operators.hpp"

namespace moesim {

MoeLayerOutput ExpertParallelPolicy::build_moe_layer(TaskGraph& plan, const PolicyContext& ctx,
                                                     const MoeLayerInput& in) {
  const Cluster& cl = ctx.cluster;
  const ModelSpec& m = ctx.model;
  const int G = cl.num_gpus();
  const int L = in.layer;
  std::vector<int> gpus(G);
  for (int g = 0; g < G; ++g) gpus[g] = g;

  const Dispatch d = dispatch(ctx, in);
  const double tb = token_bytes(m);

  // Shared experts see every home token and need no communication: they overlap the scatter.
  std::vector<TaskId> shared(G, 0);
  std::vector<char> has_shared(G, 0);
  for (int g = 0; g < G; ++g) {
    auto ops = shared_expert_ops(m, in.home_tokens[g]);
    if (ops.empty() || in.home_tokens[g] == 0) continue;
    const TaskId dep[] = {in.ready[g]};
    shared[g] = plan.compute(g, Phase::kExperts, L, std::move(ops), dep);
    has_shared[g] = 1;
  }

  // Scatter: a collective, so it starts when every GPU has routed (implicit barrier).
  const TaskId all_routed = plan.join(in.ready, Phase::kDispatch, L);
  std::vector<std::vector<double>> bytes(G, std::vector<double>(G, 0.0));
  for (int s = 0; s < G; ++s)
    for (int t = 0; t < G; ++t) bytes[s][t] = static_cast<double>(d.send[s][t]) * tb;
  const std::vector<TaskId> scattered =
      add_all_to_all(plan, cl, gpus, bytes, Phase::kDispatch, L, std::vector<TaskId>(G, all_routed));

  MoeLayerOutput out;
  out.gpu_tokens.assign(G, 0);
  out.tokens_dropped = d.dropped;
  std::vector<TaskId> experts_done(G);
  for (int g = 0; g < G; ++g) {
    std::vector<std::int64_t> per_expert;
    for (std::size_t e = 0; e < d.load[g].size(); ++e) {
      if (d.load[g][e] == 0) continue;
      per_expert.push_back(d.load[g][e]);
      out.gpu_tokens[g] += d.load[g][e];
    }
    const TaskId dep[] = {scattered[g]};
    experts_done[g] = per_expert.empty() ? plan.join(dep, Phase::kExperts, L)
                                         : plan.compute(g, Phase::kExperts, L, expert_ops(m, per_expert), dep);
  }

  // Gather: the reverse all-to-all, again a barrier collective.
  const TaskId all_computed = plan.join(experts_done, Phase::kCombine, L);
  std::vector<std::vector<double>> back(G, std::vector<double>(G, 0.0));
  for (int s = 0; s < G; ++s)
    for (int t = 0; t < G; ++t) back[t][s] = bytes[s][t];
  const std::vector<TaskId> gathered =
      add_all_to_all(plan, cl, gpus, back, Phase::kCombine, L, std::vector<TaskId>(G, all_computed));

  out.done.resize(G);
  for (int g = 0; g < G; ++g) {
    std::vector<TaskId> deps{gathered[g]};
    if (has_shared[g]) deps.push_back(shared[g]);
    out.done[g] = in.home_tokens[g] > 0
                      ? plan.compute(g, Phase::kMerge, L, combine_ops(m, in.home_tokens[g]), deps)
                      : plan.join(deps, Phase::kMerge, L);
  }
  return out;
}

}  // namespace moesim
