#pragma once
// Shared fixtures of the policy tests: a fully connected cluster without latencies, policies
// built from option mappings, hand-made routings and forecasts, and plans run on the engine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "sim/flow_network.hpp"
#include "hardware/cost_model.hpp"
#include "models/routing.hpp"
#include "serving/batch_planner.hpp"
#include "policies/policy.hpp"
#include "predictors/estimates.hpp"
#include "predictors/forecast.hpp"
#include "sim/plan_executor.hpp"
#include "hardware/phase.hpp"

namespace moesim::testing_support {

/// `nodes` nodes of `gpus_per_node` GPUs, every pair NVLinked at `pair_GBps`; zero latencies and
/// launch costs, and collectives at line rate (collective_model "line-rate"), so that closed-form
/// answers about a policy's plan hold. NCCL's pricing has its own closed-form tests
/// (tests/hardware/test_nccl_tuning.cpp).
inline ClusterSpec full_mesh(int nodes, int gpus_per_node, double pair_GBps = 100.0) {
  ClusterSpec c = cluster_presets().get("hgx-a100-4gpu-nvlink").value;
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  c.gpus_per_pcie_switch = gpus_per_node;
  c.fabric = Fabric::kNvLinkMesh;
  c.nvlink_bandwidth_GBps = pair_GBps;
  c.nvlink_latency_us = 0.0;
  c.collective_launch_us = 0.0;
  c.collective_model = "line-rate";
  return c;
}

/// A registered policy built from `opts`, failing the test if the options do not validate.
inline std::unique_ptr<Policy> make_policy(const std::string& name, const YAML::Node& opts) {
  Diagnostics d;
  const auto& info = policies().get(name).value;
  const ParamSet p = read_params(opts, info.params, SourceMap("test"), d);
  EXPECT_TRUE(d.empty()) << d.to_string();
  return info.make(p);
}

/// Top-1 routing where expert e receives counts[e] tokens, in token order.
inline LayerRouting fixed_routing(const std::vector<std::int64_t>& counts) {
  LayerRouting r;
  r.top_k = 1;
  r.num_experts = static_cast<int>(counts.size());
  for (std::size_t e = 0; e < counts.size(); ++e)
    for (std::int64_t i = 0; i < counts[e]; ++i) r.experts.push_back(static_cast<int>(e));
  r.num_tokens = static_cast<std::int64_t>(r.experts.size());
  return r;
}

/// fixed_routing(counts) with its tokens in a fixed shuffled order (Fisher–Yates driven by an LCG
/// seeded with `seed`), so that each expert's tokens are spread over the home GPUs.
inline LayerRouting mixed_routing(const std::vector<std::int64_t>& counts, std::uint64_t seed) {
  LayerRouting r = fixed_routing(counts);
  for (std::size_t i = r.experts.size(); i > 1; --i) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    std::swap(r.experts[i - 1], r.experts[(seed >> 33) % i]);
  }
  return r;
}

/// Sets `policy` up and plans batch 0 with `r` as the routing of every MoE layer.
inline BatchPlan plan_with(Policy& policy, const PolicyContext& ctx, const LayerRouting& r) {
  policy.setup(ctx);
  return plan_batch(policy, ctx, 0, std::vector<LayerRouting>(static_cast<std::size_t>(ctx.model.num_moe_layers()), r));
}

/// Per GPU: the ops of its compute tasks of `phase` in `layer`, in plan order.
inline std::vector<std::vector<Op>> ops_of_phase(const TaskGraph& g, Phase phase, int layer, int gpus) {
  std::vector<std::vector<Op>> out(static_cast<std::size_t>(gpus));
  for (const Task& t : g.tasks())
    if (t.kind == TaskKind::kCompute && t.phase == phase && t.layer == layer)
      for (const Op& op : g.ops_of(t)) out[static_cast<std::size_t>(t.gpu)].push_back(op);
  return out;
}

/// Bytes of `phase` transfers that arrive at each GPU in `layer`.
inline std::vector<double> bytes_into(const TaskGraph& g, const Cluster& c, Phase phase, int layer) {
  std::vector<double> in(static_cast<std::size_t>(c.num_gpus()), 0.0);
  for (const Task& t : g.tasks())
    if (t.kind == TaskKind::kTransfer && t.phase == phase && t.layer == layer)
      for (int gpu = 0; gpu < c.num_gpus(); ++gpu)
        if (t.dst == c.gpu_endpoint(gpu)) in[static_cast<std::size_t>(gpu)] += t.bytes;
  return in;
}

/// The oracle: every selection of `r` predicted right (ε = 0), as the `oracle` predictor says.
inline Forecast oracle_forecast(const LayerRouting& r) { return token_forecast(r.experts, r, ErrorModel::kTypical, 0.0); }

/// A token-to-expert forecast of `r` that gets a fraction `eps` of the selections wrong, spread
/// evenly (selection i is wrong where ⌊(i+1)·ε⌋ > ⌊i·ε⌋), each predicted as the next expert.
inline Forecast mispredicting_forecast(const LayerRouting& r, double eps, ErrorModel model = ErrorModel::kTypical) {
  std::vector<std::int32_t> p = r.experts;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (std::floor(static_cast<double>(i + 1) * eps) > std::floor(static_cast<double>(i) * eps))
      p[i] = (p[i] + 1) % r.num_experts;
  return token_forecast(std::move(p), r, model, 0.0);
}

/// A distribution-only forecast (MoE-GPS §3.2.1) predicting `share`, with ε its error rate
/// against `r`'s true shares.
inline Forecast distribution_forecast(const LayerRouting& r, std::vector<double> share,
                                      ErrorModel model = ErrorModel::kTypical) {
  Forecast f;
  f.kind = Forecast::Kind::kDistribution;
  f.error = distribution_error_rate(share, expert_shares(r));
  f.expert_share = std::move(share);
  f.error_model = model;
  return f;
}

/// Plans batch 0 of an already set-up `policy` with `r` and `f` as every MoE layer's routing
/// and forecast.
inline BatchPlan plan_forecast(Policy& policy, const PolicyContext& ctx, const LayerRouting& r, const Forecast& f) {
  const auto n = static_cast<std::size_t>(ctx.model.num_moe_layers());
  const std::vector<Forecast> forecasts(n, f);
  return plan_batch(policy, ctx, 0, std::vector<LayerRouting>(n, r), &forecasts);
}

/// Runs `plan` on an idle `cluster` with the engine's cost model: each task's timing.
inline std::vector<TaskTiming> execute_plan(const TaskGraph& plan, const Cluster& cluster) {
  const ComputeCostModel cost = ComputeCostModel::for_cluster(cluster.spec());  // the hooks hold a reference
  Simulator sim;
  FlowNetwork net(sim);
  cluster.install(net);
  PlanExecutor exec(sim, net, cluster.num_gpus(), engine_hooks(cluster, cost));
  return exec.run(plan);
}

/// The most imbalanced MoE layer of `bp`: max / mean selections computed per GPU.
inline double worst_max_over_mean(const BatchPlan& bp) {
  double worst = 0.0;
  for (const auto& moe : bp.moe) {
    const auto& n = moe.gpu_tokens;
    const auto sum = std::accumulate(n.begin(), n.end(), std::int64_t{0});
    if (sum > 0)
      worst = std::max(worst, static_cast<double>(*std::max_element(n.begin(), n.end()) * static_cast<std::int64_t>(n.size())) /
                                  static_cast<double>(sum));
  }
  return worst;
}

/// Bytes of all `phase` transfers in `g`.
inline double phase_bytes(const TaskGraph& g, Phase phase) {
  double bytes = 0.0;
  for (const Task& t : g.tasks()) bytes += t.kind == TaskKind::kTransfer && t.phase == phase ? t.bytes : 0.0;
  return bytes;
}

/// Per GPU: the time its expert compute tasks took in an executed plan, all layers together.
inline std::vector<double> expert_busy(const TaskGraph& g, const std::vector<TaskTiming>& timing, int gpus) {
  std::vector<double> busy(static_cast<std::size_t>(gpus), 0.0);
  for (TaskId id = 0; id < g.size(); ++id)
    if (const Task& t = g.task(id); t.kind == TaskKind::kCompute && t.phase == phase::kExperts)
      busy[static_cast<std::size_t>(t.gpu)] += static_cast<double>(timing[id].end - timing[id].start);
  return busy;
}

}  // namespace moesim::testing_support
