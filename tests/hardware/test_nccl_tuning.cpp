// NCCL's tuning model (hardware/nccl_tuning): the channels NCCL's search finds, the algorithm and
// protocol it picks per size, each worked out by hand from NCCL 2.19.3's tables, and the flow
// model reproducing NCCL's time on an idle cluster.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "hardware/collectives.hpp"
#include "hardware/cost_model.hpp"
#include "hardware/nccl_tuning.hpp"
#include "sim/network_backend.hpp"
#include "sim/plan_executor.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

Cluster preset(const char* name) { return Cluster(cluster_presets().get(name).value); }
std::vector<int> first(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

TEST(NcclTopology, ChannelsAsNcclsSearchFindsThem) {
  // DGX A100: 12 NVLinks x 20 GB/s; 6 rings at 40 GB/s, duplicated to 12 x 20 (ncclTopoDupChannels).
  const NcclTopology dgx = nccl_topology(preset("dgx-a100"), first(8));
  EXPECT_TRUE(dgx.nvlink_intra);
  EXPECT_DOUBLE_EQ(dgx.intra_GBps, 240.0);
  EXPECT_EQ(dgx.ring_channels, 12);
  EXPECT_DOUBLE_EQ(dgx.ring_bw_GBps, 20.0);
  // The 4-GPU mesh: every GPU's three 80 GB/s peer links, all used: also 12 x 20.
  const NcclTopology mesh = nccl_topology(preset("hgx-a100-4gpu-nvlink"), first(4));
  EXPECT_DOUBLE_EQ(mesh.intra_GBps, 240.0);
  EXPECT_EQ(mesh.ring_channels, 12);
  EXPECT_DOUBLE_EQ(mesh.ring_channels * mesh.ring_bw_GBps, 240.0);
  // Two of its GPUs: one 80 GB/s pair, 2 rings x 40 duplicated to 4 x 20.
  const NcclTopology pair = nccl_topology(preset("hgx-a100-4gpu-nvlink"), first(2));
  EXPECT_EQ(pair.ring_channels, 4);
  EXPECT_DOUBLE_EQ(pair.ring_bw_GBps, 20.0);
  // DGX H100: 18 links x 20 = 360; sm90 speeds start at 60: 6 x 60, duplicated to 12 x 30.
  const NcclTopology h100 = nccl_topology(preset("dgx-h100"), first(8));
  EXPECT_EQ(h100.ring_channels, 12);
  EXPECT_DOUBLE_EQ(h100.ring_bw_GBps, 30.0);
  // Two DGX A100: one channel per rail NIC at 24 GB/s (200 Gb/s behind PCIe gen4 x16), and the
  // tree's intra-node speed raised to 30 (min(2 x 24, 240 / 8), stepped down).
  const NcclTopology two = nccl_topology(preset("2x-dgx-a100"), first(16));
  EXPECT_EQ(two.nodes, 2);
  EXPECT_EQ(two.ring_channels, 8);
  EXPECT_DOUBLE_EQ(two.net_GBps, 24.0);
  EXPECT_DOUBLE_EQ(two.tree_bw_GBps, 30.0);
  EXPECT_TRUE(two.nic_near_gpu);
  EXPECT_TRUE(two.amd_cpu);
  // PCIe only: no NVLink, gen4 at NCCL's 24 GB/s, one ring at the 20 GB/s step.
  const NcclTopology pcie = nccl_topology(preset("a100-4gpu-pcie"), first(4));
  EXPECT_FALSE(pcie.nvlink_intra);
  EXPECT_EQ(pcie.ring_channels, 1);
  EXPECT_DOUBLE_EQ(pcie.ring_bw_GBps, 20.0);
}

// DGX A100, 8 GPUs, all-reduce: ring LL (15.0 us, 60 GB/s bus), LL128 (40.6 us, 220.8) and Simple
// (56.0 us, 240) cross at 1.2 MB and 24.3 MB; tree is never cheapest on one node.
TEST(NcclChoice, AllReduceProtocolBySizeOnDgxA100) {
  const Cluster c = preset("dgx-a100");
  const std::vector<std::tuple<double, NcclAlgo, NcclProto>> table{
      {1e3, NcclAlgo::kRing, NcclProto::kLL},       {1e6, NcclAlgo::kRing, NcclProto::kLL},
      {1.3e6, NcclAlgo::kRing, NcclProto::kLL128},  {4e6, NcclAlgo::kRing, NcclProto::kLL128},
      {24e6, NcclAlgo::kRing, NcclProto::kLL128},   {25e6, NcclAlgo::kRing, NcclProto::kSimple},
      {1e9, NcclAlgo::kRing, NcclProto::kSimple}};
  for (const auto& [bytes, algo, proto] : table) {
    const NcclChoice ch = nccl_choose(c, CollectiveKind::kAllReduce, first(8), bytes);
    EXPECT_EQ(ch.best.algo, algo) << bytes;
    EXPECT_EQ(ch.best.proto, proto) << bytes;
  }
  const NcclChoice ch = nccl_choose(c, CollectiveKind::kAllReduce, first(8), 1e9);
  const auto& ring = ch.candidates;  // Tree LL/LL128/Simple, Ring LL/LL128/Simple, NVLS x 3
  EXPECT_DOUBLE_EQ(ring[3].latency_us, 6.6 + 14 * 0.6);
  EXPECT_DOUBLE_EQ(ring[3].bus_GBps, 60.0);  // min(llMaxBw 87.7, 240 / 4)
  EXPECT_DOUBLE_EQ(ring[4].latency_us, 14.0 + 14 * 1.9);
  EXPECT_DOUBLE_EQ(ring[4].bus_GBps, 240.0 * 0.92);
  EXPECT_DOUBLE_EQ(ring[5].latency_us, 8.4 + 14 * 3.4);
  EXPECT_DOUBLE_EQ(ring[5].bus_GBps, 240.0);
  EXPECT_NEAR(ring[5].alg_GBps, 240.0 * 8 / 14, 1e-9);
}

// Two DGX A100 (AMD hosts): tree LL at 1 KB (6.8 + 2 x (7 x 0.6 + 1 x 5.0) = 25.2 us); ring Simple
// for large buffers, its latency x 1.4 for the "plateau effect of ring".
TEST(NcclChoice, TreeForSmallRingForLargeAcrossNodes) {
  const Cluster c = preset("2x-dgx-a100");
  const NcclChoice small = nccl_choose(c, CollectiveKind::kAllReduce, first(16), 1e3);
  EXPECT_EQ(small.best.algo, NcclAlgo::kTree);
  EXPECT_EQ(small.best.proto, NcclProto::kLL);
  EXPECT_DOUBLE_EQ(small.best.latency_us, 25.2);
  const NcclChoice large = nccl_choose(c, CollectiveKind::kAllReduce, first(16), 1e9);
  EXPECT_EQ(large.best.algo, NcclAlgo::kRing);
  EXPECT_EQ(large.best.proto, NcclProto::kSimple);
  // 30 steps: 4 cross the network (14 us each), 26 inside at max(3.4, 3 x 2.0 AMD net overhead).
  EXPECT_NEAR(large.best.latency_us, 1.4 * (8.4 + 26 * 6.0 + 4 * 14.0), 1e-9);
  EXPECT_DOUBLE_EQ(large.best.bus_GBps, 8 * 24.0);
}

TEST(NcclChoice, Ll128NeedsNvlinkAndNvlsNeedsHopperNvswitch) {
  const NcclChoice pcie = nccl_choose(preset("a100-4gpu-pcie"), CollectiveKind::kAllReduce, first(4), 4e6);
  EXPECT_FALSE(pcie.candidates[4].enabled);  // ring LL128
  EXPECT_NE(pcie.candidates[4].why_disabled.find("LL128"), std::string::npos);
  EXPECT_NE(pcie.best.proto, NcclProto::kLL128);
  // H100 NVSwitch: NVLS (23 us; 8 channels of 360 / 9 GB/s, as each GPU heads one and joins all,
  // x 5/6) wins large buffers, ring LL small ones; with 2 GPUs NCCL turns NVLS off.
  const Cluster h100 = preset("dgx-h100");
  const NcclChoice big = nccl_choose(h100, CollectiveKind::kAllReduce, first(8), 256e6);
  EXPECT_EQ(big.best.algo, NcclAlgo::kNvls);
  EXPECT_DOUBLE_EQ(big.best.latency_us, 23.0);
  EXPECT_NEAR(big.best.alg_GBps, 8 * 360.0 / 9 * 5 / 6, 1e-9);
  EXPECT_FALSE(nccl_choose(h100, CollectiveKind::kAllReduce, first(2), 256e6).candidates[8].enabled);
  EXPECT_EQ(nccl_choose(h100, CollectiveKind::kAllReduce, first(8), 1e3).best.algo, NcclAlgo::kRing);
  // All-gather runs ring only (no tree), here with Simple at 64 MB.
  const NcclChoice ag = nccl_choose(preset("dgx-a100"), CollectiveKind::kAllGather, first(8), 64e6);
  EXPECT_FALSE(ag.candidates[0].enabled);
  EXPECT_EQ(ag.best.algo, NcclAlgo::kRing);
  EXPECT_EQ(ag.steps, 7);
}

TEST(NcclP2p, LlUpTo16KiBThenSimple) {
  const Cluster c = preset("2x-dgx-a100");
  const NcclCandidate ll = nccl_p2p(c, 0, 1, 16384);
  EXPECT_EQ(ll.proto, NcclProto::kLL);
  EXPECT_DOUBLE_EQ(ll.latency_us, 6.6 + 0.6);
  EXPECT_DOUBLE_EQ(ll.alg_GBps, 87.7);  // min(240 / 2, llMaxBw)
  const NcclCandidate simple = nccl_p2p(c, 0, 1, 16385);
  EXPECT_EQ(simple.proto, NcclProto::kSimple);
  EXPECT_DOUBLE_EQ(simple.alg_GBps, 240.0);
  const NcclCandidate net = nccl_p2p(c, 0, 8, 1e6);
  EXPECT_DOUBLE_EQ(net.latency_us, 8.4 + 14.0);
  EXPECT_DOUBLE_EQ(net.alg_GBps, 24.0);
  // Network connections have no LL buffers by default: a small cross-node send is Simple too.
  const NcclCandidate small_net = nccl_p2p(c, 0, 8, 1e3);
  EXPECT_EQ(small_net.proto, NcclProto::kSimple);
  EXPECT_DOUBLE_EQ(small_net.latency_us, 8.4 + 14.0);
}

// Every node counts, whatever the order of the GPU list: a communicator with one GPU on node 0
// and eight on node 1 gets one NIC channel and PCI-class intra latencies (one GPU per node there).
TEST(NcclTopology, TheWeakestNodeDecidesWhateverTheOrder) {
  const Cluster c = preset("2x-dgx-a100");
  const std::vector<int> a{7, 8, 9, 10, 11, 12, 13, 14, 15}, b{8, 9, 10, 11, 12, 13, 14, 15, 7};
  const NcclTopology ta = nccl_topology(c, a), tb = nccl_topology(c, b);
  EXPECT_EQ(ta.ring_channels, 1);
  EXPECT_EQ(tb.ring_channels, 1);
  EXPECT_FALSE(ta.intra_hw_nvlink);
  EXPECT_EQ(nccl_choose(c, CollectiveKind::kAllReduce, a, 64e6).best.time_us,
            nccl_choose(c, CollectiveKind::kAllReduce, b, 64e6).best.time_us);
  EXPECT_THROW(nccl_choose(c, CollectiveKind::kAllReduce, a, -1.0), std::invalid_argument);
}

// The flows reproduce NCCL's latency + bytes / bandwidth on an idle cluster, whatever it picked.
// Exactly where the ring channels load their links evenly; on the DGX-1's hybrid cube-mesh, whose
// channels relay through GPUs and share links unevenly, max-min sharing lets the channels drift
// apart and the flows run up to 3% longer than the formula.
TEST(NcclFlows, IdleTimeIsNcclsFormula) {
  for (const char* name : {"dgx-a100", "2x-dgx-a100", "hgx-a100-4gpu-nvlink", "dgx-h100", "dgx1-v100", "a100-4gpu-pcie"}) {
    const Cluster c = preset(name);
    const double tolerance = std::string(name) == "dgx1-v100" ? 0.03 : 1e-5;
    for (const double bytes : {1e3, 1e5, 3e6, 64e6, 1e9}) {
      for (const auto kind : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather}) {
        const int n = c.num_gpus();
        const NcclChoice ch = nccl_choose(c, kind, first(n), bytes);
        const double sim = ticks_to_us(collective_time(c, kind, n, bytes));
        EXPECT_GE(sim, ch.best.time_us * (1 - 1e-5) - 1e-5);
        EXPECT_NEAR(sim, ch.best.time_us, tolerance * ch.best.time_us + 1e-5)
            << name << " " << collective_name(kind) << " " << bytes << " " << nccl_algo_name(ch.best.algo);
      }
      const NcclCandidate p = nccl_p2p(c, 0, c.num_gpus() - 1, bytes);
      EXPECT_NEAR(ticks_to_us(collective_time(c, CollectiveKind::kSendRecv, c.num_gpus(), bytes)), p.time_us,
                  1e-5 * p.time_us + 1e-5)
          << name << " " << bytes;
    }
  }
}

// Contention still acts: two 256 MB all-reduces over the same GPUs at once take about twice as
// long as one (its latency is 56 us of 1.9 ms).
TEST(NcclFlows, ConcurrentCollectivesShareLinks) {
  const Cluster c = preset("dgx-a100");
  const double one = ticks_to_seconds(collective_time(c, CollectiveKind::kAllReduce, 8, 256e6));
  TaskGraph g;
  add_ring_all_reduce(g, c, first(8), 256e6, phase::kCollective, -1, {});
  add_ring_all_reduce(g, c, first(8), 256e6, phase::kCollective, -1, {});
  Simulator sim;
  const auto net = make_network("flow", sim);
  c.install(*net);
  const ComputeCostModel no_compute(c.spec().gpu);
  PlanExecutor exec(sim, *net, c.num_gpus(), engine_hooks(c, no_compute));
  exec.run(g);
  EXPECT_NEAR(ticks_to_seconds(sim.now()) / one, 2.0, 0.05);
}

}  // namespace
}  // namespace moesim
