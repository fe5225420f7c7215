// static-ep: placement, token conservation, capacity drops, and the skewed all-to-all's
// hot-receiver bottleneck emerging from the flow model (MoE-GPS §2).
#include <gtest/gtest.h>

#include <numeric>

#include "sim/flow_network.hpp"
#include "hardware/collectives.hpp"
#include "hardware/cost_model.hpp"
#include "models/model_spec.hpp"
#include "serving/batch_planner.hpp"
#include "policies/expert_parallel.hpp"
#include "sim/plan_executor.hpp"
#include "tests/support/policy_fixtures.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

using testing_support::fixed_routing;

ClusterSpec full_mesh(int gpus, double pair_GBps) { return testing_support::full_mesh(1, gpus, pair_GBps); }

std::unique_ptr<Policy> make_static(const std::string& placement, double cf) {
  YAML::Node opts;
  opts["placement"] = placement;
  opts["capacity_factor"] = cf;
  return testing_support::make_policy("static-ep", opts);
}

}  // namespace

TEST(StaticEp, ContiguousAndRoundRobinOwners) {
  EXPECT_EQ(static_owner("contiguous", 8, 4), (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(static_owner("round-robin", 8, 4), (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
  // HarMoEny's ablation: 128 experts on 8 GPUs puts the first 10 experts on GPU 0 (16 per GPU).
  const auto owner = static_owner("contiguous", 128, 8);
  for (int e = 0; e < 10; ++e) EXPECT_EQ(owner[e], 0);
}

class StaticEpPlan : public ::testing::Test {
 protected:
  ModelSpec model = model_presets().get("switch-base-8").value;
  Cluster cluster{full_mesh(4, 100.0)};
  PrefillWorkload wl{8, 16, 1};
  PolicyContext ctx{model, cluster, wl};
};

TEST_F(StaticEpPlan, TokenConservationDropless) {
  auto policy = make_static("contiguous", 0.0);
  policy->setup(ctx);
  std::vector<LayerRouting> routing;
  for (int l = 0; l < model.num_moe_layers(); ++l) routing.push_back(fixed_routing({40, 30, 20, 10, 8, 8, 8, 4}));
  const BatchPlan bp = plan_batch(*policy, ctx, 0, routing);
  ASSERT_EQ(bp.moe.size(), static_cast<std::size_t>(model.num_moe_layers()));
  for (const auto& moe : bp.moe) {
    EXPECT_EQ(moe.tokens_dropped, 0);
    EXPECT_EQ(std::accumulate(moe.gpu_tokens.begin(), moe.gpu_tokens.end(), std::int64_t{0}), 128);
    // Contiguous: experts {0,1} on GPU 0 → 70 selections.
    EXPECT_EQ(moe.gpu_tokens[0], 70);
  }
}

TEST_F(StaticEpPlan, CapacityFactorDropsAndCounts) {
  auto policy = make_static("contiguous", 1.0);
  policy->setup(ctx);
  std::vector<LayerRouting> routing;
  for (int l = 0; l < model.num_moe_layers(); ++l) routing.push_back(fixed_routing({40, 30, 20, 10, 8, 8, 8, 4}));
  const BatchPlan bp = plan_batch(*policy, ctx, 0, routing);
  // Capacity = ceil(1.0 * 128 / 8) = 16 per expert: drops 24 + 14 + 4 = 42.
  for (const auto& moe : bp.moe) {
    EXPECT_EQ(moe.tokens_dropped, 42);
    EXPECT_EQ(std::accumulate(moe.gpu_tokens.begin(), moe.gpu_tokens.end(), std::int64_t{0}) + moe.tokens_dropped, 128);
  }
}

// MoE-GPS §2: on a fully connected topology the all-to-all is bottlenecked by the GPU with the
// most popular expert and its time scales with skewness. Nothing here encodes that formula: the
// hot GPU's incoming links carry more bytes and the flow model times them.
TEST(StaticEpAllToAll, TimeScalesWithSkewnessOnFullMesh) {
  const int G = 4;
  const Cluster cluster(full_mesh(G, 100.0));
  const double tokens_per_gpu = 4096, bytes_per_token = 8192;
  auto time_for = [&](double skew) {
    // Expert 0 (GPU 0) gets skew/G of every GPU's tokens; the others share the rest.
    std::vector<std::vector<double>> bytes(G, std::vector<double>(G, 0.0));
    for (int s = 0; s < G; ++s)
      for (int d = 0; d < G; ++d) {
        const double share = d == 0 ? skew / G : (1.0 - skew / G) / (G - 1);
        bytes[s][d] = tokens_per_gpu * share * bytes_per_token;
      }
    TaskGraph g;
    const TaskId start = g.join({});
    std::vector<int> gpus{0, 1, 2, 3};
    add_all_to_all(g, cluster, gpus, bytes, phase::kDispatch, 0, std::vector<TaskId>(G, start));
    Simulator sim;
    FlowNetwork net(sim);
    cluster.install(net);
    const ComputeCostModel no_compute(cluster.spec().gpu);
    PlanExecutor ex(sim, net, G, engine_hooks(cluster, no_compute));
    ex.run(g);
    return static_cast<double>(sim.now());
  };
  const double t1 = time_for(1.0), t2 = time_for(2.0), t3 = time_for(3.0);
  EXPECT_NEAR(t2 / t1, 2.0, 0.02);
  EXPECT_NEAR(t3 / t1, 3.0, 0.03);
  // Closed form: the hot pair link carries tokens_per_gpu * skew/G tokens at 100 GB/s.
  EXPECT_NEAR(ticks_to_seconds(static_cast<Tick>(t2)), tokens_per_gpu * 2.0 / G * bytes_per_token / 100e9, 1e-7);
}

}  // namespace moesim
