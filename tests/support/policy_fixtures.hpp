#pragma once
// Shared fixtures of the policy tests: a fully connected cluster without latencies, policies
// built from option mappings, and hand-made routings.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "models/routing.hpp"
#include "policies/batch_planner.hpp"
#include "policies/policy.hpp"

namespace moesim::testing_support {

/// `nodes` nodes of `gpus_per_node` GPUs, every pair NVLinked at `pair_GBps`; zero latencies and
/// launch costs so that closed-form answers hold.
inline ClusterSpec full_mesh(int nodes, int gpus_per_node, double pair_GBps = 100.0) {
  ClusterSpec c = cluster_presets().get("hgx-a100-4gpu-nvlink").value;
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  c.gpus_per_pcie_switch = gpus_per_node;
  c.fabric = Fabric::kNvLinkMesh;
  c.nvlink_bandwidth_GBps = pair_GBps;
  c.nvlink_latency_us = 0.0;
  c.collective_launch_us = 0.0;
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

}  // namespace moesim::testing_support
