// Properties every registered policy must keep, checked over the whole registry so that a new
// policy is covered the day it registers (DESIGN "Tests we value" 2):
//  - token conservation: every selection is computed exactly once (dispatch policies) or, for
//    policies that shard experts, by every GPU (each computes its shard); none dropped unless
//    the policy says so;
//  - every plan runs to completion on the engine (no dependency that cannot be met), also for
//    degenerate routings (all tokens on one expert, top-k routing, an idle GPU);
//  - determinism: the same inputs give the same plan timings.
#include <algorithm>
#include <gtest/gtest.h>

#include <numeric>

#include "sim/flow_network.hpp"
#include "hardware/cost_model.hpp"
#include "models/model_spec.hpp"
#include "serving/batch_planner.hpp"
#include "sim/plan_executor.hpp"
#include "tests/support/policy_fixtures.hpp"

namespace moesim {
namespace {

using testing_support::fixed_routing;

/// One batch of one policy with its default options: planned, executed, summarised.
struct PlannedBatch {
  BatchPlan plan;
  std::vector<TaskTiming> timing;
};

class PolicyProperties : public ::testing::TestWithParam<std::string> {
 protected:
  /// Plans and runs `batches` batches whose every MoE layer is routed by `route(batch, layer)`.
  std::vector<PlannedBatch> run(const ModelSpec& model, const ClusterSpec& spec, const PrefillWorkload& wl,
                                const std::function<LayerRouting(int, int)>& route, int batches = 2) {
    const Cluster cluster(spec);
    PolicyContext ctx{model, cluster, wl};
    ctx.profile_routing = [&](int i, int l) { return route(-(i + 1), l); };
    auto policy = testing_support::make_policy(GetParam(), YAML::Node(YAML::NodeType::Map));
    policy->setup(ctx);
    Simulator sim;
    FlowNetwork net(sim);
    cluster.install(net);
    const ComputeCostModel cost = ComputeCostModel::for_cluster(spec);
    PlanExecutor exec(sim, net, cluster.num_gpus(), engine_hooks(cluster, cost));
    std::vector<PlannedBatch> out;
    for (int b = 0; b < batches; ++b) {
      std::vector<LayerRouting> layers;
      for (int l = 0; l < model.num_moe_layers(); ++l) layers.push_back(route(b, l));
      PlannedBatch pb{plan_batch(*policy, ctx, b, layers), {}};
      pb.timing = exec.run(pb.plan.graph);  // throws if a task can never run
      out.push_back(std::move(pb));
    }
    return out;
  }

  static ModelSpec small_model(const std::string& preset, int layers) {
    ModelSpec m = model_presets().get(preset).value;
    m.layers = layers;
    return m;
  }

  /// Every selection computed once (or, for sharded experts, by every GPU); none dropped.
  static void expect_conserved(const std::vector<PlannedBatch>& batches, std::int64_t selections, int gpus) {
    for (const auto& b : batches)
      for (const auto& moe : b.plan.moe) {
        EXPECT_EQ(moe.tokens_dropped, 0) << "default options must be dropless";
        ASSERT_EQ(moe.gpu_tokens.size(), static_cast<std::size_t>(gpus));
        const std::int64_t sum = std::accumulate(moe.gpu_tokens.begin(), moe.gpu_tokens.end(), std::int64_t{0});
        const bool each_once = sum == selections;
        const bool sharded = std::all_of(moe.gpu_tokens.begin(), moe.gpu_tokens.end(),
                                         [&](std::int64_t t) { return t == selections; });
        EXPECT_TRUE(each_once || sharded) << "selections " << selections << ", computed " << sum;
      }
  }
};

PrefillWorkload workload(std::int64_t batch_size, std::int64_t seq_len) {
  PrefillWorkload w;
  w.batch_size = batch_size;
  w.seq_len = seq_len;
  w.batches = 2;
  return w;
}

TEST_P(PolicyProperties, ConservesTokensUnderSkewedTopOneRouting) {
  const ModelSpec m = small_model("switch-base-8", 4);
  const PrefillWorkload wl = workload(8, 64);
  // Expert 0 takes most tokens; expert 7 none.
  const std::vector<std::int64_t> counts{300, 60, 40, 40, 30, 30, 12, 0};
  const auto batches = run(m, testing_support::full_mesh(1, 4), wl, [&](int, int) { return fixed_routing(counts); });
  expect_conserved(batches, 512, 4);
}

TEST_P(PolicyProperties, ConservesTokensWhenEveryTokenPicksOneExpert) {
  const ModelSpec m = small_model("switch-base-8", 4);
  const PrefillWorkload wl = workload(8, 64);
  const auto batches =
      run(m, testing_support::full_mesh(1, 4), wl, [&](int, int) { return fixed_routing({0, 0, 0, 512, 0, 0, 0, 0}); });
  expect_conserved(batches, 512, 4);
}

TEST_P(PolicyProperties, ConservesTopTwoSelectionsAcrossNodes) {
  ModelSpec m = small_model("mixtral-8x7b", 2);
  m.hidden = 512;  // a small hidden size keeps every layout within GPU memory
  m.expert_ffn = 1024;
  const PrefillWorkload wl = workload(3, 100);  // 3 sequences on 4 GPUs: one GPU has no tokens
  std::vector<double> pi{0.9, 0.3, 0.2, 0.2, 0.1, 0.1, 0.1, 0.1};  // inclusion probabilities, sum 2
  ClusterSpec two_nodes = testing_support::full_mesh(2, 2);
  two_nodes.nics_per_node = 2;
  two_nodes.nic_bandwidth_Gbps = 200.0;
  const auto batches = run(m, two_nodes, wl, [&](int b, int l) {
    Rng rng = Rng::derive(7, Stream::kBatchRouting, static_cast<std::uint64_t>(b + 10), static_cast<std::uint64_t>(l));
    return systematic_sample(pi, 2, wl.tokens_per_batch(), rng);
  });
  expect_conserved(batches, 600, 4);
}

TEST_P(PolicyProperties, SameInputsGiveSameTimings) {
  const ModelSpec m = small_model("switch-base-8", 4);
  const PrefillWorkload wl = workload(8, 64);
  auto route = [&](int b, int l) {
    Rng rng = Rng::derive(3, Stream::kBatchRouting, static_cast<std::uint64_t>(b + 5), static_cast<std::uint64_t>(l));
    return systematic_sample({0.5, 0.2, 0.1, 0.1, 0.05, 0.05, 0.0, 0.0}, 1, wl.tokens_per_batch(), rng);
  };
  const auto a = run(m, testing_support::full_mesh(1, 4), wl, route);
  const auto b = run(m, testing_support::full_mesh(1, 4), wl, route);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].timing.size(), b[i].timing.size());
    for (std::size_t t = 0; t < a[i].timing.size(); ++t) EXPECT_EQ(a[i].timing[t].end, b[i].timing[t].end);
  }
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

// Every policy that plans synchronous steps (AMoE runs in the layer-queue mode: tests/serving/test_amoe.cpp).
std::vector<std::string> step_planning_policies() {
  std::vector<std::string> out;
  for (const std::string& name : policies().names())
    if (policies().get(name).value.supports.stepped) out.push_back(name);
  return out;
}

TEST(PolicyRegistry, OnlyAmoeRunsInLayerQueueModeAndOnlyItHasNoPolicyObject) {
  const auto planning = step_planning_policies();
  EXPECT_EQ(planning.size() + 1, policies().names().size());
  EXPECT_EQ(std::count(planning.begin(), planning.end(), "amoe"), 0);
  for (const std::string& name : policies().names())
    EXPECT_EQ(static_cast<bool>(policies().get(name).value.make), policies().get(name).value.supports.stepped) << name;
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, PolicyProperties, ::testing::ValuesIn(step_planning_policies()), test_name);

}  // namespace
}  // namespace moesim
