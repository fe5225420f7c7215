// DeepEP's kernels in closed form (hardware/deepep.hpp): the bytes each path moves (normal: one
// RDMA copy per other destination node, NVLink forwarding to each destination GPU; low-latency:
// one message per (token, selection)), the routing expectations, the time law, and a concrete
// routing's traffic agreeing with the closed form on average.
#include <gtest/gtest.h>

#include <random>

#include "core/diagnostics.hpp"
#include "hardware/deepep.hpp"

namespace moesim {
namespace {

// An H800-like cluster (8 GPUs per node, 200 GB/s NVLink per direction, a 400 Gb/s NIC per GPU)
// built from the dgx-h100 preset's fields.
Cluster h800(int nodes) {
  ClusterSpec s = cluster_presets().get("dgx-h100").value;
  s.nodes = nodes;
  s.nvlink_bandwidth_GBps = 200.0;
  return Cluster(s);
}

// C(m - a, k) / C(m, k) written out.
double miss(double m, double a, int k) {
  double r = 1;
  for (int i = 0; i < k; ++i) r *= (m - a - i) / (m - i);
  return r;
}

DeepEpParams params(DeepEpKernel k, DeepEpOp op, int ep, long long tokens) {
  DeepEpParams p;
  p.kernel = k;
  p.op = op;
  p.ep = ep;
  p.tokens = tokens;
  p.topk_groups = 4;
  p.sms = 24;
  return p;
}

}  // namespace

TEST(DeepEp, MessageSizesAreDeepEpsRecords) {
  // internode.cu get_num_bytes_per_token and internode_ll.cu num_bytes_per_msg for hidden 7168.
  EXPECT_EQ(deepep_message_bytes(params(DeepEpKernel::kNormal, DeepEpOp::kDispatch, 16, 1)).record, 7472.0);
  EXPECT_EQ(deepep_message_bytes(params(DeepEpKernel::kNormal, DeepEpOp::kDispatch, 16, 1)).counted, 7392.0);
  EXPECT_EQ(deepep_message_bytes(params(DeepEpKernel::kNormal, DeepEpOp::kCombine, 16, 1)).record, 14384.0);
  EXPECT_EQ(deepep_message_bytes(params(DeepEpKernel::kLowLatency, DeepEpOp::kDispatch, 16, 1)).record, 7408.0);
  EXPECT_EQ(deepep_message_bytes(params(DeepEpKernel::kLowLatency, DeepEpOp::kCombine, 16, 1)).record, 14336.0);
}

TEST(DeepEp, RoutingClosedForms) {
  // EP8 on one node, 256 experts (32 per GPU), top-8: P(GPU hit) = 1 - C(224,8)/C(256,8).
  const Cluster one = h800(1);
  const DeepEpRouting r8 = deepep_routing(one, params(DeepEpKernel::kNormal, DeepEpOp::kDispatch, 8, 1));
  EXPECT_NEAR(r8.p_rank, 1 - miss(256, 32, 8), 1e-12);
  EXPECT_NEAR(r8.ranks_per_token, 8 * (1 - miss(256, 32, 8)), 1e-12);
  EXPECT_EQ(r8.nodes_per_token, 1.0);
  // EP64 on 8 nodes, at most 4 nodes per token: the 8 experts come from 4 x 32.
  const DeepEpRouting r64 = deepep_routing(h800(8), params(DeepEpKernel::kNormal, DeepEpOp::kDispatch, 64, 1));
  EXPECT_NEAR(r64.nodes_per_token, 4 * (1 - miss(128, 32, 8)), 1e-12);
  EXPECT_NEAR(r64.ranks_per_token, 64 * 0.5 * (1 - miss(128, 4, 8)), 1e-12);
  EXPECT_LE(r64.nodes_per_token, 4.0);
}

TEST(DeepEp, NormalInternodeBytes) {
  const long long T = 4096;
  for (int nodes : {2, 4, 8}) {
    const Cluster c = h800(nodes);
    const auto p = params(DeepEpKernel::kNormal, DeepEpOp::kDispatch, 8 * nodes, T);
    const DeepEpCost d = deepep_cost(c, p);
    const DeepEpRouting& r = d.routing;
    // RDMA: one record per destination node other than the token's own.
    EXPECT_NEAR(d.rdma_bytes, T * (r.nodes_per_token - r.p_node) * 7472.0, 1e-3);
    // NVLink: the forwarders copy to every destination GPU but themselves: 7 of every 8 copies.
    EXPECT_NEAR(d.nvlink_bytes, T * r.ranks_per_token * 7.0 / 8.0 * 7472.0, 1e-3);
    // Counted as test_internode.py does: tokens x destination nodes (own included) x 7392 B.
    EXPECT_NEAR(d.counted_bytes, T * r.nodes_per_token * 7392.0, 1e-3);
    EXPECT_EQ(d.bandwidth_label, "RDMA");
    // Combine moves the same copies backwards, in BF16 records.
    const DeepEpCost cb = deepep_cost(c, params(DeepEpKernel::kNormal, DeepEpOp::kCombine, 8 * nodes, T));
    EXPECT_NEAR(cb.rdma_bytes / d.rdma_bytes, 14384.0 / 7472.0, 1e-12);
  }
}

TEST(DeepEp, LowLatencyBytesAreTokensTimesTopkTimesMessage) {
  const long long T = 128;
  const Cluster c = h800(2);
  auto p = params(DeepEpKernel::kLowLatency, DeepEpOp::kDispatch, 16, T);
  p.ll_nvlink = false;
  const DeepEpCost all_rdma = deepep_cost(c, p);
  EXPECT_EQ(all_rdma.rdma_bytes, T * 8 * 7408.0);
  EXPECT_EQ(all_rdma.nvlink_bytes, 0.0);
  EXPECT_EQ(all_rdma.counted_bytes, T * 8 * 7408.0);
  // Time law: the latency floor plus the NIC's drain at 48 of 50 GB/s.
  EXPECT_NEAR(all_rdma.rdma_GBps, 48.0, 1e-9);
  EXPECT_NEAR(all_rdma.time_us, all_rdma.fixed_us + T * 8 * 7408.0 / 48e3, 1e-9);
  EXPECT_NEAR(all_rdma.bandwidth_GBps, all_rdma.counted_bytes / (all_rdma.time_us * 1e3), 1e-12);
  // PR #173: half the selections stay on the node, 1/16 on the GPU itself.
  p.ll_nvlink = true;
  const DeepEpCost nv = deepep_cost(c, p);
  EXPECT_NEAR(nv.rdma_bytes, T * 8 * 0.5 * 7408.0, 1e-6);
  EXPECT_NEAR(nv.nvlink_bytes, T * 8 * (0.5 - 1.0 / 16) * 7408.0, 1e-6);
  EXPECT_LT(nv.time_us, all_rdma.time_us);
  EXPECT_EQ(nv.counted_bytes, all_rdma.counted_bytes);
}

TEST(DeepEp, MoreEpNeverLowersTheRdmaShare) {
  // Under uniform top-k routing. (With a node limit the normal kernels' RDMA copies stop growing at
  // the limit while the NVLink forwards still do, so the share may dip slightly at large EP.)
  for (DeepEpKernel k : {DeepEpKernel::kNormal, DeepEpKernel::kLowLatency}) {
    double last = -1;
    for (int nodes : {1, 2, 4, 8, 16, 32}) {
      auto p = params(k, DeepEpOp::kDispatch, 8 * nodes, 256);
      p.topk_groups = 0;
      const DeepEpCost d = deepep_cost(h800(nodes), p);
      const double share = d.rdma_bytes / (d.rdma_bytes + d.nvlink_bytes);
      EXPECT_GE(share, last - 1e-12) << deepep_kernel_name(k) << " at " << nodes << " nodes";
      last = share;
    }
  }
}

TEST(DeepEp, SmBudgetCanBind) {
  auto p = params(DeepEpKernel::kNormal, DeepEpOp::kDispatch, 8, 4096);
  p.sms = 2;
  const DeepEpCost d = deepep_cost(h800(1), p);
  EXPECT_EQ(d.bottleneck, "sm");
  EXPECT_NEAR(d.time_us, d.fixed_us + d.counted_bytes / (2 * 246.0 / 16 * 1e3), 1e-9);
}

TEST(DeepEp, ConcreteRoutingFollowsTheTwoHopPath) {
  const Cluster c = h800(3);
  auto p = params(DeepEpKernel::kNormal, DeepEpOp::kDispatch, 24, 1);
  p.experts = 240;
  const std::vector<int> home{1};
  const std::vector<std::vector<int>> dests{{9, 10, 10, 17, 1}};  // node 1 twice, node 2, itself
  const auto t = deepep_traffic(c, p, home, dests);
  const double rec = 7472.0;
  EXPECT_EQ(t[1].rdma_send, 2 * rec);              // to GPU 9 (node 1, local rank 1) and GPU 17
  EXPECT_EQ(t[9].rdma_recv, rec);
  EXPECT_EQ(t[9].nvlink_send, rec);                // forwards to 10; 9 itself keeps its copy
  EXPECT_EQ(t[10].nvlink_recv, rec);
  EXPECT_EQ(t[17].rdma_recv, rec);
  EXPECT_EQ(t[17].nvlink_send, 0.0);
  EXPECT_EQ(t[1].nvlink_send, 0.0);                // its own node: only itself
  EXPECT_GT(t[10].finish_us, t[0].finish_us);      // a receiver waits for its forwarder
  // Combine: the same copies backwards.
  p.op = DeepEpOp::kCombine;
  const auto back = deepep_traffic(c, p, home, dests);
  EXPECT_EQ(back[1].rdma_recv, 2 * 14384.0);
  EXPECT_EQ(back[10].nvlink_send, 14384.0);
}

TEST(DeepEp, UniformRoutingAveragesToTheClosedForm) {
  // Draw DeepEP's test routing (4 of 4 nodes, top-8 of 256 experts uniformly) and compare the
  // mean per-GPU traffic with deepep_cost's expectation.
  const Cluster c = h800(4);
  const auto p = params(DeepEpKernel::kNormal, DeepEpOp::kDispatch, 32, 512);
  std::mt19937_64 rng(7);
  std::vector<int> home;
  std::vector<std::vector<int>> dests;
  std::vector<int> experts(256);
  for (int e = 0; e < 256; ++e) experts[static_cast<std::size_t>(e)] = e;
  for (int g = 0; g < 32; ++g)
    for (int t = 0; t < 512; ++t) {
      std::shuffle(experts.begin(), experts.end(), rng);
      std::vector<int> d;
      for (int k = 0; k < 8; ++k) d.push_back(experts[static_cast<std::size_t>(k)] / 8);
      home.push_back(g);
      dests.push_back(d);
    }
  const auto traffic = deepep_traffic(c, p, home, dests);
  double rdma = 0, nvl = 0;
  for (const auto& x : traffic) {
    rdma += x.rdma_send / 32;
    nvl += x.nvlink_send / 32;
  }
  const DeepEpCost d = deepep_cost(c, p);
  EXPECT_NEAR(rdma / d.rdma_bytes, 1.0, 0.02);
  EXPECT_NEAR(nvl / d.nvlink_bytes, 1.0, 0.02);
}

TEST(DeepEp, RejectsWhatDeepEpCannotRun) {
  auto p = params(DeepEpKernel::kNormal, DeepEpOp::kDispatch, 16, 128);
  EXPECT_THROW(deepep_cost(h800(1), p), InputError);  // EP beyond the cluster
  p.experts = 250;
  EXPECT_THROW(deepep_cost(h800(2), p), InputError);  // experts do not divide over EP
  ClusterSpec s = cluster_presets().get("dgx-h100").value;
  s.nics_per_node = 0;
  s.nic_bandwidth_Gbps = 0;
  p = params(DeepEpKernel::kLowLatency, DeepEpOp::kDispatch, 8, 128);
  p.ll_nvlink = false;
  EXPECT_THROW(deepep_cost(Cluster(s), p), InputError);  // all-RDMA LL without NICs
  p.ll_nvlink = true;
  EXPECT_NO_THROW(deepep_cost(Cluster(s), p));
}

}  // namespace moesim
