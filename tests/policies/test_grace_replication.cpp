// GRACE-MoE's replication and routing (§4.2-§4.3): Eq. 2 and Eq. 3 on hand-computed cases, the
// hot experts of the heaviest group, Algorithm 4's weights, and Algorithm 5 never leaving the node
// when a replica is on it.
#include <gtest/gtest.h>

#include <map>
#include <numeric>

#include "policies/grace/replication.hpp"

namespace moesim {

TEST(GraceReplication, EquationTwo) {
  EXPECT_EQ(replica_count(3.7, 8), 3);
  EXPECT_EQ(replica_count(0.6, 8), 1);   // at least one
  EXPECT_EQ(replica_count(10.0, 4), 3);  // at most n_gpu - 1
  EXPECT_EQ(replica_count(2.0, 2), 1);
}

// 4 GPUs, loads 60 | 10 | 20 | 10 (mean 25, ρ = 2.4, n = 2). GPU 0's experts 40, 15, 5: the hot
// ones reach W_max · 2/3 = 40 with the first alone. W_r = 40 splits into 3 instances of 40/3:
// GPU 0 predicts 60 - 40 + 40/3, GPUs 1 and 3 (the least loaded) 10 + 40/3.
TEST(GraceReplication, HotExpertsTargetsAndEquationThree) {
  const std::vector<double> load = {40, 15, 5, 10, 20, 10};
  const std::vector<int> gpu = {0, 0, 0, 1, 2, 3};
  const ReplicationPlan p = plan_replication(load, gpu, 4, false);
  EXPECT_EQ(p.heaviest_gpu, 0);
  EXPECT_EQ(p.replicas, 2);
  EXPECT_EQ(p.hot_experts, (std::vector<int>{0}));
  EXPECT_EQ(p.target_gpus, (std::vector<int>{1, 3}));
  EXPECT_NEAR(p.predicted_load[0], 60 - 40 + 40.0 / 3, 1e-12);
  EXPECT_NEAR(p.predicted_load[1], 10 + 40.0 / 3, 1e-12);
  EXPECT_NEAR(p.predicted_load[2], 20, 1e-12);
  EXPECT_NEAR(p.predicted_load[3], 10 + 40.0 / 3, 1e-12);
  EXPECT_NEAR(std::accumulate(p.predicted_load.begin(), p.predicted_load.end(), 0.0), 100.0, 1e-9);  // conserved
  // The fixed-replica ablation: one copy to the least loaded GPU; the hot set reaches W_max / 2.
  const ReplicationPlan f = plan_replication(load, gpu, 4, true);
  EXPECT_EQ(f.replicas, 1);
  EXPECT_EQ(f.hot_experts, (std::vector<int>{0}));
  EXPECT_EQ(f.target_gpus, (std::vector<int>{1}));
}

TEST(GraceReplication, PollingWeightsDrawProportionally) {
  Rng rng(3);
  const std::map<int, double> w = {{1, 1.0}, {4, 3.0}};
  int four = 0;
  const int n = 40000;
  for (int i = 0; i < n; ++i) four += choose_by_polling_weight(w, rng) == 4;
  EXPECT_NEAR(static_cast<double>(four) / n, 0.75, 0.01);
  EXPECT_THROW(choose_by_polling_weight({}, rng), std::invalid_argument);
}

// Two nodes of four GPUs: whatever the replica set, a token stays on its GPU when it holds a
// replica and never leaves its node when the node holds one.
TEST(GraceReplication, TopologyAwareRoutingPrefersGpuThenNode) {
  const std::vector<int> node_of = {0, 0, 0, 0, 1, 1, 1, 1};
  Rng rng(5);
  for (int mask = 1; mask < 256; ++mask) {
    std::map<int, double> w;
    for (int g = 0; g < 8; ++g)
      if (mask & (1 << g)) w[g] = 1.0 + g;
    for (int token_gpu = 0; token_gpu < 8; ++token_gpu) {
      const int got = topology_aware_route(w, token_gpu, node_of, rng);
      ASSERT_TRUE(w.count(got));
      if (w.count(token_gpu)) {
        EXPECT_EQ(got, token_gpu);
      }
      bool on_node = false;
      for (const auto& [g, x] : w) on_node = on_node || node_of[static_cast<std::size_t>(g)] == node_of[static_cast<std::size_t>(token_gpu)];
      if (on_node) {
        EXPECT_EQ(node_of[static_cast<std::size_t>(got)], node_of[static_cast<std::size_t>(token_gpu)]) << mask;
      }
    }
  }
}

}  // namespace moesim
