// The node-aware all-to-all of GRACE-MoE §5.1: each token reaches each destination GPU once and
// crosses to each other node once (counted row by row and byte by byte on the plan's flows), its
// gateway forwards inside the node, and the stages run in order.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <set>

#include "hardware/cluster.hpp"
#include "hardware/hierarchical_all_to_all.hpp"
#include "sim/task_graph.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

Cluster two_nodes(int per_node) {
  ClusterSpec s = cluster_presets().get("grace-rtx4090-2x2").value;
  s.gpus_per_node = per_node;
  return Cluster(s);
}

std::int64_t total(const TokenDispatchRows::Matrix& m) {
  std::int64_t n = 0;
  for (const auto& row : m) n = std::accumulate(row.begin(), row.end(), n);
  return n;
}

}  // namespace

TEST(TokenDispatchRows, OneRowPerGpuAndOneCrossingPerNode) {
  const Cluster c = two_nodes(2);  // GPUs 0, 1 on node 0; 2, 3 on node 1
  TokenDispatchRows flat(c, false), hier(c, true);
  const int dests[] = {3, 2, 3, 1, 0};  // top-5: two selections on GPU 3
  flat.add_token(0, dests);
  hier.add_token(0, dests);
  // Flat: one row to each distinct GPU, the home's own row on the diagonal.
  EXPECT_EQ(flat.first()[0][0], 1);
  EXPECT_EQ(flat.first()[0][1], 1);
  EXPECT_EQ(flat.first()[0][2], 1);
  EXPECT_EQ(flat.first()[0][3], 1);
  EXPECT_FALSE(flat.has_second_stage());
  // Node-aware: node 1 is entered once, at GPU 3 (the token's first selection there), which
  // forwards to GPU 2; node 0's GPUs are reached directly.
  EXPECT_EQ(hier.first()[0][3], 1);
  EXPECT_EQ(hier.first()[0][2], 0);
  EXPECT_EQ(hier.second()[3][2], 1);
  EXPECT_EQ(hier.first()[0][1], 1);
  EXPECT_EQ(hier.first()[0][0], 1);
  EXPECT_EQ(total(hier.first()) + total(hier.second()), 4);
}

TEST(TokenDispatchRows, RandomTokensCrossEachRemoteNodeExactlyOnce) {
  const Cluster c = two_nodes(4);
  const int G = c.num_gpus();
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> gpu(0, G - 1);
  TokenDispatchRows flat(c, false), hier(c, true);
  std::int64_t remote_nodes = 0, distinct_gpus = 0;
  for (int t = 0; t < 2000; ++t) {
    const int home = t % G;
    std::vector<int> dests(8);
    for (int& d : dests) d = gpu(rng);
    std::set<int> gpus(dests.begin(), dests.end()), nodes;
    for (const int d : gpus)
      if (c.node_of_gpu(d) != c.node_of_gpu(home)) nodes.insert(c.node_of_gpu(d));
    remote_nodes += static_cast<std::int64_t>(nodes.size());
    distinct_gpus += static_cast<std::int64_t>(gpus.size());
    flat.add_token(home, dests);
    hier.add_token(home, dests);
  }
  std::int64_t crossing = 0, forwarded_across = 0;
  for (int s = 0; s < G; ++s)
    for (int d = 0; d < G; ++d) {
      if (c.node_of_gpu(s) != c.node_of_gpu(d)) crossing += hier.first()[s][d];
      if (c.node_of_gpu(s) != c.node_of_gpu(d)) forwarded_across += hier.second()[s][d];
    }
  EXPECT_EQ(crossing, remote_nodes);
  EXPECT_EQ(forwarded_across, 0);  // forwarding never leaves the node
  // Every (token, GPU) pair is reached exactly once either way.
  EXPECT_EQ(total(flat.first()), distinct_gpus);
  EXPECT_EQ(total(hier.first()) + total(hier.second()), distinct_gpus);
}

TEST(StagedAllToAll, SecondStageWaitsForTheFirstAndCrossesNoNode) {
  const Cluster c = two_nodes(2);
  const int G = c.num_gpus();
  std::vector<int> gpus(static_cast<std::size_t>(G));
  std::iota(gpus.begin(), gpus.end(), 0);
  TokenDispatchRows hier(c, true);
  const int dests[] = {2, 3};
  for (int t = 0; t < 1000; ++t) hier.add_token(0, dests);
  const double tb = 4096.0;
  auto bytes = [&](const TokenDispatchRows::Matrix& m) {
    std::vector<std::vector<double>> b(static_cast<std::size_t>(G), std::vector<double>(static_cast<std::size_t>(G)));
    for (int s = 0; s < G; ++s)
      for (int d = 0; d < G; ++d) b[s][d] = static_cast<double>(m[s][d]) * tb;
    return b;
  };
  const std::vector<std::vector<std::vector<double>>> stages{bytes(hier.first()), bytes(hier.second())};
  TaskGraph g;
  const TaskId start = g.join({});
  add_staged_all_to_all(g, c, gpus, stages, phase::kDispatch, 0, std::vector<TaskId>(static_cast<std::size_t>(G), start));
  double inter = 0.0, intra = 0.0;
  int transfers = 0;
  for (const Task& t : g.tasks()) {
    if (t.kind != TaskKind::kTransfer) continue;
    ++transfers;
    (c.node_of_endpoint(t.src) != c.node_of_endpoint(t.dst) ? inter : intra) += t.bytes;
  }
  EXPECT_EQ(transfers, 2);
  EXPECT_DOUBLE_EQ(inter, 1000 * tb);  // once across, not twice
  EXPECT_DOUBLE_EQ(intra, 1000 * tb);  // then GPU 2 -> GPU 3 inside node 1
}

}  // namespace moesim
