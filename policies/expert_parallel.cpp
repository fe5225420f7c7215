#include "policies/expert_parallel.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "hardware/collectives.hpp"
#include "hardware/hierarchical_all_to_all.hpp"
#include "models/operators.hpp"
#include "policies/deepep_dispatch.hpp"
#include "hardware/phase.hpp"

namespace moesim {

std::vector<TaskId> ExpertParallelPolicy::before_scatter(TaskGraph& /*plan*/, const PolicyContext& ctx,
                                                         const MoeLayerInput& /*in*/, TaskId all_routed) {
  return std::vector<TaskId>(static_cast<std::size_t>(ctx.cluster.num_gpus()), all_routed);
}

std::vector<int> ExpertParallelPolicy::resident_experts(const PolicyContext& /*ctx*/, const MoeLayerInput& /*in*/,
                                                        int /*gpu*/) const {
  return {};
}

TaskId ExpertParallelPolicy::build_gpu_experts(TaskGraph& plan, const PolicyContext& ctx, const MoeLayerInput& in,
                                               const Dispatch& d, int g, TaskId ready, TaskId fetch_ready,
                                               std::vector<int>& restores) {
  const ModelSpec& m = ctx.model;
  const int L = in.layer;
  const auto& load = d.rows.empty() ? d.load[g] : d.rows[g];
  const TaskId ready_dep[] = {ready};
  if (d.fetch[g].empty() && d.per_expert_kernels) {
    // A loop over the local experts: each expert's GEMMs are kernels of their own, in expert
    // order on the GPU's stream.
    std::vector<TaskId> computes;
    for (const auto n : load)
      if (n > 0) computes.push_back(plan.compute(g, phase::kExperts, L, expert_ops(m, {n}), ready_dep));
    return computes.empty() ? plan.join(ready_dep, phase::kExperts, L) : plan.join(computes, phase::kExperts, L);
  }
  if (d.fetch[g].empty()) {
    // Every expert is resident: one grouped GEMM per projection over the experts with tokens.
    std::vector<std::int64_t> per_expert;
    per_expert.reserve(load.size());
    for (const auto n : load)
      if (n > 0) per_expert.push_back(n);
    return per_expert.empty() ? plan.join(ready_dep, phase::kExperts, L)
                              : plan.compute(g, phase::kExperts, L, expert_ops(m, std::move(per_expert)), ready_dep);
  }

  // Per-expert kernels so that each finished expert frees its buffer for the next fetch
  // (HarMoEny §IV-C, Fig. 5b). Resident experts run first, heaviest first (the longest kernels
  // give the fetches the most time to hide behind); fetched experts follow in fetch order.
  std::vector<int> resident;
  for (const int e : resident_experts(ctx, in, g))
    if (load[e] > 0) resident.push_back(e);
  std::stable_sort(resident.begin(), resident.end(), [&](int a, int b) { return load[a] > load[b]; });
  std::vector<TaskId> computes;  // in the order their buffers free up
  for (const int e : resident) computes.push_back(plan.compute(g, phase::kExperts, L, expert_ops(m, {load[e]}), ready_dep));

  const int free0 = d.free_buffers[g];
  if (free0 + static_cast<int>(resident.size()) == 0)
    throw std::logic_error("dispatch: GPU " + std::to_string(g) + " fetches experts but has no buffer to fetch into");
  const int host = ctx.cluster.host_endpoint(ctx.cluster.node_of_gpu(g));
  const double bytes = m.expert_bytes();
  const std::size_t resident_count = computes.size();
  for (std::size_t i = 0; i < d.fetch[g].size(); ++i) {
    const int e = d.fetch[g][i];
    if (load[e] <= 0) continue;
    // The buffer this fetch overwrites: a free one, else the one of the (i - free0)-th expert to
    // finish, in compute order.
    std::vector<TaskId> deps{fetch_ready};
    const auto slot = static_cast<std::ptrdiff_t>(i) - free0;
    if (slot >= 0) deps.push_back(computes[static_cast<std::size_t>(slot)]);
    // Synchronous fetching waits for the GPU's previous expert before it starts (the GPU idles
    // while the weights arrive).
    if (d.fetch_mode == FetchMode::kSync) deps.push_back(computes.empty() ? ready : computes.back());
    const TaskId f = plan.transfer(host, ctx.cluster.gpu_endpoint(g), bytes, phase::kFetch, L, deps, g,
                                   CopyEngine::kHostToDevice);
    const TaskId cdeps[] = {ready, f};
    computes.push_back(plan.compute(g, phase::kExperts, L, expert_ops(m, {load[e]}), cdeps));
  }
  const TaskId done = plan.join(computes, phase::kExperts, L);
  if (d.restore_overwritten) {
    // Every fetch overwrote a resident expert's buffer until the resident ones ran out.
    restores[g] = static_cast<int>(
        std::min(computes.size() - resident_count, static_cast<std::size_t>(free0) + resident_count));
  }
  return done;
}

MoeLayerOutput ExpertParallelPolicy::build_moe_layer(TaskGraph& plan, const PolicyContext& ctx,
                                                     const MoeLayerInput& in) {
  const Cluster& cl = ctx.cluster;
  const ModelSpec& m = ctx.model;
  const int G = cl.num_gpus();
  const int L = in.layer;
  std::vector<int> gpus(G);
  std::iota(gpus.begin(), gpus.end(), 0);

  const Dispatch d = dispatch(ctx, in);
  const double tb = token_bytes(m);

  // Shared experts see every home token and need no communication: they overlap the scatter.
  std::vector<TaskId> shared(G, 0);
  std::vector<char> has_shared(G, 0);
  for (int g = 0; g < G; ++g) {
    auto ops = shared_expert_ops(m, in.home_tokens[g]);
    if (ops.empty() || in.home_tokens[g] == 0) continue;
    const TaskId dep[] = {in.ready[g]};
    shared[g] = plan.compute(g, phase::kExperts, L, std::move(ops), dep);
    has_shared[g] = 1;
  }

  // Scatter: a collective, so it starts when every GPU has routed (implicit barrier), after any
  // step the policy puts in between.
  const TaskId all_routed = plan.join(in.ready, phase::kDispatch, L);
  const std::vector<TaskId> may_scatter = before_scatter(plan, ctx, in, all_routed);
  if (static_cast<int>(may_scatter.size()) != G)
    throw std::logic_error("before_scatter returned the wrong number of per-GPU tasks");

  // Weight copies, anchored where the policy's decision is known.
  std::vector<std::vector<TaskId>> arriving(G);
  for (const WeightCopy& c : d.copies) {
    const bool from_gpu = c.src_endpoint < G;
    TaskId anchor = all_routed;
    if (d.copies_start == CopyStart::kLayerStart && !in.layer_start.empty())
      anchor = in.layer_start[from_gpu ? c.src_endpoint : c.dst_gpu];
    else if (d.copies_start == CopyStart::kAfterSchedule)
      anchor = may_scatter[c.dst_gpu];
    const TaskId dep[] = {anchor};
    arriving[c.dst_gpu].push_back(plan.transfer(c.src_endpoint, cl.gpu_endpoint(c.dst_gpu), m.expert_bytes(),
                                                phase::kFetch, L, dep, from_gpu ? c.src_endpoint : c.dst_gpu,
                                                from_gpu ? CopyEngine::kPeer : CopyEngine::kHostToDevice));
  }

  if (!d.forward.empty() && !d.gather.empty())
    throw std::logic_error("dispatch: a two-stage scatter with its own gather is not supported");
  const auto to_bytes = [&](const std::vector<std::vector<std::int64_t>>& rows) {
    std::vector<std::vector<double>> b(G, std::vector<double>(G));
    for (int s = 0; s < G; ++s)
      for (int t = 0; t < G; ++t) b[s][t] = static_cast<double>(rows[s][t]) * tb;
    return b;
  };
  // DeepEP's kernels (deployment.alltoall) carry the selections where the policy sends each one
  // (a Dispatch with its own second stage or gather keeps NCCL's pairwise sends): a collective
  // call every GPU enters together, each leaving it when its own traffic has drained.
  const bool deepep = ctx.alltoall != MoeAllToAll::kNccl && d.forward.empty() && d.gather.empty() && in.routing;
  const auto deepep_call = [&](DeepEpOp op, Phase phase, TaskId start) {
    const std::vector<DeepEpGpuTraffic> traffic = deepep_layer_traffic(ctx, in, d, op);
    std::vector<TaskId> done(static_cast<std::size_t>(G));
    const TaskId dep[] = {start};
    for (int g = 0; g < G; ++g)
      done[static_cast<std::size_t>(g)] = plan.delay(traffic[static_cast<std::size_t>(g)].finish(), phase, L, dep, g);
    return done;
  };
  // Scatter: one all-to-all, or the node-aware two stages (send, then forward inside nodes).
  // Built in place: a braced list would copy the matrix (8 MB at 1,024 GPUs) out of its
  // initializer_list.
  std::vector<std::vector<std::vector<double>>> scatter;
  scatter.push_back(to_bytes(d.send));
  if (!d.forward.empty()) scatter.push_back(to_bytes(d.forward));
  const std::vector<TaskId> scattered =
      deepep ? deepep_call(DeepEpOp::kDispatch, phase::kDispatch, plan.join(may_scatter, phase::kDispatch, L))
             : add_staged_all_to_all(plan, cl, gpus, scatter, phase::kDispatch, L, may_scatter);

  MoeLayerOutput out;
  out.gpu_tokens.assign(G, 0);
  out.tokens_dropped = d.dropped;
  std::vector<TaskId> experts_done(G);
  std::vector<int> restores(G, 0);
  if (!d.rows.empty()) out.gpu_rows.assign(G, 0);
  for (int g = 0; g < G; ++g) {
    for (const auto n : d.load[g]) out.gpu_tokens[g] += n;
    if (!d.rows.empty())
      for (const auto n : d.rows[g]) out.gpu_rows[g] += n;
    TaskId ready = scattered[g];
    if (!arriving[g].empty()) {
      arriving[g].push_back(scattered[g]);
      ready = plan.join(arriving[g], phase::kExperts, L);
    }
    experts_done[g] = build_gpu_experts(plan, ctx, in, d, g, ready, may_scatter[g], restores);
  }

  // Gather: the reverse all-to-all, again a barrier collective.
  const TaskId all_computed = plan.join(experts_done, phase::kCombine, L);
  // Gather: the scatter's stages backwards (forwarded outputs return to their gateway first). A
  // one-stage gather is the scatter's matrix transposed, handed over as it is.
  const bool reverse_of_scatter = d.gather.empty() && d.forward.empty();
  std::vector<std::vector<std::vector<double>>> combine;
  if (!d.gather.empty()) combine.push_back(to_bytes(d.gather));
  else if (!reverse_of_scatter) {
    combine.push_back(transpose_of(scatter[1]));
    combine.push_back(transpose_of(scatter[0]));
  }
  const std::vector<TaskId> combine_start(G, all_computed);
  const std::vector<TaskId> gathered =
      deepep ? deepep_call(DeepEpOp::kCombine, phase::kCombine, all_computed)
      : reverse_of_scatter
          ? add_all_to_all(plan, cl, gpus, scatter.front(), phase::kCombine, L, combine_start, /*transposed=*/true)
          : add_staged_all_to_all(plan, cl, gpus, combine, phase::kCombine, L, combine_start);
  const std::vector<std::vector<double>>& last_combine = reverse_of_scatter ? scatter.front() : combine.back();
  for (int g = 0; g < G; ++g) out.local_bytes += scatter.front()[g][g] + last_combine[g][g];

  out.done.resize(G);
  for (int g = 0; g < G; ++g) {
    std::vector<TaskId> deps{gathered[g]};
    if (has_shared[g]) deps.push_back(shared[g]);
    out.done[g] = in.home_tokens[g] > 0
                      ? plan.compute(g, phase::kMerge, L, combine_ops(m, in.home_tokens[g]), deps)
                      : plan.join(deps, phase::kMerge, L);
    // Overwritten experts come back once the layer is merged. They only need to be in place
    // before this layer runs again (the next batch), so they belong to no layer's latency
    // (layer -1) and overlap the following layers on the copy engine.
    const TaskId after[] = {out.done[g]};
    const int host = cl.host_endpoint(cl.node_of_gpu(g));
    for (int i = 0; i < restores[g]; ++i)
      plan.transfer(host, cl.gpu_endpoint(g), m.expert_bytes(), phase::kFetch, -1, after, g, CopyEngine::kHostToDevice);
  }
  return out;
}

}  // namespace moesim
