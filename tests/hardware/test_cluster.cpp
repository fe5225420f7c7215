// Cluster topology and routes: closed-form answers on the presets' wiring.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sim/flow_network.hpp"
#include "hardware/cluster.hpp"

namespace moesim {

namespace {

constexpr double kGB = 1e9;

ClusterSpec preset(const char* name) { return cluster_presets().get(name).value; }

std::pair<std::string, std::string> ends(const std::string& link_name) {
  const auto arrow = link_name.find("->");
  return {link_name.substr(0, arrow), link_name.substr(arrow + 2)};
}

std::vector<std::string> hop_names(const Cluster& c, int src, int dst) {
  std::vector<std::string> out;
  for (LinkId l : c.route(src, dst)) out.push_back(c.links()[l].name);
  return out;
}

bool crosses(const Cluster& c, int src, int dst, LinkClass cls) {
  for (LinkId l : c.route(src, dst))
    if (c.links()[l].cls == cls) return true;
  return false;
}

std::string endpoint_vertex(const Cluster& c, int ep) {
  const std::string node = "n" + std::to_string(c.node_of_endpoint(ep)) + ".";
  if (ep < c.num_gpus()) return node + "gpu" + std::to_string(ep % c.spec().gpus_per_node);
  return node + "cpu0";
}

}  // namespace

TEST(Fabric, NamesRoundTrip) {
  for (Fabric f : {Fabric::kNvSwitch, Fabric::kNvLinkMesh, Fabric::kHybridCubeMesh, Fabric::kPcie}) {
    Fabric back = Fabric::kPcie;
    ASSERT_TRUE(parse_fabric(fabric_name(f), back)) << fabric_name(f);
    EXPECT_EQ(back, f);
  }
  Fabric f;
  EXPECT_FALSE(parse_fabric("nvlink", f));
  EXPECT_STREQ(link_class_name(LinkClass::kNvLink), "nvlink");
  EXPECT_STREQ(link_class_name(LinkClass::kPcie), "pcie");
  EXPECT_STREQ(link_class_name(LinkClass::kSocket), "socket");
  EXPECT_STREQ(link_class_name(LinkClass::kNetwork), "network");
}

// Every preset: routes are contiguous chains from source to destination that pass through a GPU
// only as NCCL's NVLink relay (GPU to GPU, NVLink in and out, one relay), and intra-node routes
// never touch the network.
TEST(ClusterPresets, RoutesAreChainsThatTransitAGpuOnlyAsNvLinkRelay) {
  for (const auto* e : cluster_presets().entries()) {
    SCOPED_TRACE(e->name);
    EXPECT_EQ(e->value.name, e->name);
    const Cluster c(e->value);
    EXPECT_NE(c.describe().find(fabric_name(c.spec().fabric)), std::string::npos);
    for (int s = 0; s < c.num_endpoints(); ++s) {
      for (int d = 0; d < c.num_endpoints(); ++d) {
        const auto hops = hop_names(c, s, d);
        if (s == d) {
          EXPECT_TRUE(hops.empty());
          EXPECT_TRUE(std::isinf(c.route_bandwidth_Bps(s, d)));
          continue;
        }
        ASSERT_FALSE(hops.empty()) << s << "->" << d;
        EXPECT_EQ(ends(hops.front()).first, endpoint_vertex(c, s));
        EXPECT_EQ(ends(hops.back()).second, endpoint_vertex(c, d));
        for (std::size_t i = 0; i + 1 < hops.size(); ++i) {
          const std::string via = ends(hops[i]).second;
          EXPECT_EQ(via, ends(hops[i + 1]).first) << hops[i] << " then " << hops[i + 1];
          if (via.find(".gpu") == std::string::npos) continue;
          EXPECT_TRUE(s < c.num_gpus() && d < c.num_gpus() && hops.size() == 2) << "route " << s << "->" << d
                                                                                 << " transits " << via;
          EXPECT_EQ(c.links()[c.route(s, d)[0]].cls, LinkClass::kNvLink);
          EXPECT_EQ(c.links()[c.route(s, d)[1]].cls, LinkClass::kNvLink);
        }
        const bool same_node = c.node_of_endpoint(s) == c.node_of_endpoint(d);
        EXPECT_EQ(crosses(c, s, d, LinkClass::kNetwork), !same_node) << s << "->" << d;
      }
    }
  }
}

TEST(Dgx1, EveryGpuHasSixNvLinkBricks) {
  const Cluster c(preset("dgx1-v100"));
  std::vector<double> out(8, 0.0), in(8, 0.0);
  int nvlinks = 0;
  for (const auto& l : c.links()) {
    if (l.cls != LinkClass::kNvLink) continue;
    ++nvlinks;
    const auto [from, to] = ends(l.name);
    out[from.back() - '0'] += l.bandwidth_Bps;
    in[to.back() - '0'] += l.bandwidth_Bps;
  }
  EXPECT_EQ(nvlinks, 32);  // 16 linked pairs, both directions
  for (int g = 0; g < 8; ++g) {
    EXPECT_DOUBLE_EQ(out[g], 6 * 25 * kGB) << "gpu" << g;
    EXPECT_DOUBLE_EQ(in[g], 6 * 25 * kGB) << "gpu" << g;
  }
}

TEST(Dgx1, LinkedPairsUseNvLinkOthersRelayThroughOneGpu) {
  const Cluster c(preset("dgx1-v100"));
  // GPU0-GPU3: two bricks, one hop.
  ASSERT_EQ(c.route(0, 3).size(), 1u);
  EXPECT_EQ(c.links()[c.route(0, 3)[0]].cls, LinkClass::kNvLink);
  EXPECT_DOUBLE_EQ(c.route_bandwidth_Bps(0, 3), 50 * kGB);
  EXPECT_DOUBLE_EQ(c.route_bandwidth_Bps(0, 1), 25 * kGB);
  // GPU0-GPU5: no NVLink of their own. NCCL (>= 2.11, NVB paths) relays through a GPU linked to
  // both rather than crossing the sockets over PCIe: GPU 1 (0-1 one brick, 1-5 two) and GPU 4
  // (0-4 two, 4-5 one) cost the same; the lower index wins.
  EXPECT_EQ(hop_names(c, 0, 5), (std::vector<std::string>{"n0.gpu0->n0.gpu1", "n0.gpu1->n0.gpu5"}));
  EXPECT_DOUBLE_EQ(c.route_bandwidth_Bps(0, 5), 25 * kGB);
  // GPU3-GPU4: through GPU 0, two bricks each way (not GPU 7: 3-7 is one brick).
  EXPECT_EQ(hop_names(c, 3, 4), (std::vector<std::string>{"n0.gpu3->n0.gpu0", "n0.gpu0->n0.gpu4"}));
  EXPECT_DOUBLE_EQ(c.route_bandwidth_Bps(3, 4), 50 * kGB);
}

// Every GPU pair of a DGX-1 talks over NVLink only: directly where wired, otherwise through one
// relay GPU; GPU traffic never crosses a socket. Host traffic keeps its PCIe routes.
TEST(Dgx1, NoGpuPairCrossesTheSockets) {
  const Cluster c(preset("dgx1-v100"));
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      const auto r = c.route(a, b);
      ASSERT_FALSE(r.empty());
      EXPECT_LE(r.size(), 2u) << a << "->" << b;
      for (LinkId l : r) EXPECT_EQ(c.links()[l].cls, LinkClass::kNvLink) << a << "->" << b;
      if (r.size() == 2) {  // the relay is a GPU linked to both ends
        EXPECT_EQ(ends(c.links()[r[0]].name).second, ends(c.links()[r[1]].name).first);
        EXPECT_NE(ends(c.links()[r[0]].name).second.find("gpu"), std::string::npos);
      }
    }
    EXPECT_FALSE(crosses(c, a, c.host_endpoint(0), LinkClass::kNvLink)) << a;
    EXPECT_FALSE(crosses(c, c.host_endpoint(0), a, LinkClass::kNvLink)) << a;
  }
  // Two-socket host memory: GPU 5 reaches it across the socket link, as before.
  EXPECT_TRUE(crosses(c, c.host_endpoint(0), 5, LinkClass::kSocket));
}

TEST(DgxA100, GpuPairsGoThroughTheNvSwitch) {
  const Cluster c(preset("dgx-a100"));
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) {
      if (i == j) continue;
      const auto hops = hop_names(c, i, j);
      ASSERT_EQ(hops.size(), 2u);
      EXPECT_EQ(hops[0], "n0.gpu" + std::to_string(i) + "->n0.nvswitch");
      EXPECT_EQ(hops[1], "n0.nvswitch->n0.gpu" + std::to_string(j));
      EXPECT_DOUBLE_EQ(c.route_bandwidth_Bps(i, j), 300 * kGB);
      EXPECT_EQ(c.route_latency(i, j), us_to_ticks(0.7) * 2);
    }
  }
}

TEST(DgxA100, HostTrafficUsesPcieAndTheSocketLinkWhenRemote) {
  const Cluster c(preset("dgx-a100"));
  const int host = c.host_endpoint(0);
  EXPECT_EQ(hop_names(c, 0, host), (std::vector<std::string>{"n0.gpu0->n0.pcie0", "n0.pcie0->n0.cpu0"}));
  EXPECT_EQ(hop_names(c, host, 7), (std::vector<std::string>{"n0.cpu0->n0.cpu1", "n0.cpu1->n0.pcie3",
                                                             "n0.pcie3->n0.gpu7"}));
  EXPECT_DOUBLE_EQ(c.route_bandwidth_Bps(host, 7), 31.5 * kGB);
}

TEST(MoeGpsSetups, NvLinkMeshAndSharedPcieSwitch) {
  const Cluster nv(preset("hgx-a100-4gpu-nvlink"));
  const Cluster pc(preset("a100-4gpu-pcie"));
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      if (i == j) continue;
      EXPECT_EQ(nv.route(i, j).size(), 1u);
      EXPECT_DOUBLE_EQ(nv.route_bandwidth_Bps(i, j), 100 * kGB);
      EXPECT_EQ(hop_names(pc, i, j), (std::vector<std::string>{"n0.gpu" + std::to_string(i) + "->n0.pcie0",
                                                               "n0.pcie0->n0.gpu" + std::to_string(j)}));
      EXPECT_DOUBLE_EQ(pc.route_bandwidth_Bps(i, j), 31.5 * kGB);
    }
  }
}

TEST(PcieServer, GpusUnderDifferentSocketsCrossTheSocketLink) {
  const Cluster c(preset("pcie-8x-rtx4090"));
  EXPECT_EQ(c.route(0, 3).size(), 2u);  // same switch
  EXPECT_FALSE(crosses(c, 0, 3, LinkClass::kSocket));
  EXPECT_EQ(hop_names(c, 0, 4), (std::vector<std::string>{"n0.gpu0->n0.pcie0", "n0.pcie0->n0.cpu0",
                                                           "n0.cpu0->n0.cpu1", "n0.cpu1->n0.pcie1",
                                                           "n0.pcie1->n0.gpu4"}));
}

TEST(TwoNodes, InterNodeRoutesUseEachGpusOwnNic) {
  const Cluster c(preset("2x-dgx-a100"));
  ASSERT_EQ(c.num_gpus(), 16);
  ASSERT_EQ(c.num_endpoints(), 18);
  EXPECT_EQ(hop_names(c, 1, 9), (std::vector<std::string>{"n0.gpu1->n0.pcie0", "n0.pcie0->n0.nic1",
                                                           "n0.nic1->net", "net->n1.nic1", "n1.nic1->n1.pcie0",
                                                           "n1.pcie0->n1.gpu1"}));
  EXPECT_DOUBLE_EQ(c.route_bandwidth_Bps(0, 8), 200e9 / 8);
  // Latency: four PCIe hops and two NIC hops.
  EXPECT_EQ(c.route_latency(0, 8), 4 * us_to_ticks(1.0) + 2 * us_to_ticks(2.5));
  // The eight GPUs of a node leave through eight different NICs (rails), so a node's
  // inter-node bandwidth is 8 x 200 Gb/s, not one NIC's worth.
  std::set<std::string> exits;
  for (int g = 0; g < 8; ++g) {
    for (const auto& h : hop_names(c, g, g + 8))
      if (ends(h).second == "net") exits.insert(h);
  }
  EXPECT_EQ(exits.size(), 8u);
  // Intra-node pairs stay on the NVSwitch even in a multi-node cluster.
  EXPECT_EQ(c.route(8, 15).size(), 2u);
  EXPECT_TRUE(crosses(c, c.host_endpoint(0), 12, LinkClass::kNetwork));
}

TEST(TwoNodes, Dgx1NodesShareOneNicPerSwitch) {
  ClusterSpec s = preset("dgx1-v100");
  s.nodes = 2;
  const Cluster c(s);
  // GPUs 0 and 1 share PCIe switch 0 and its only NIC.
  EXPECT_EQ(hop_names(c, 0, 8)[1], "n0.pcie0->n0.nic0");
  EXPECT_EQ(hop_names(c, 1, 8)[1], "n0.pcie0->n0.nic0");
  EXPECT_EQ(hop_names(c, 2, 8)[1], "n0.pcie1->n0.nic1");
}

TEST(Install, LinkIdsMatchIndices) {
  const Cluster c(preset("2x-dgx-h100"));
  Simulator sim;
  FlowNetwork net(sim);
  c.install(net);
  ASSERT_EQ(net.link_count(), c.links().size());
  for (std::size_t i = 0; i < c.links().size(); ++i) {
    EXPECT_EQ(net.link(static_cast<LinkId>(i)).name, c.links()[i].name);
    EXPECT_DOUBLE_EQ(net.link(static_cast<LinkId>(i)).bandwidth_Bps, c.links()[i].bandwidth_Bps);
    EXPECT_EQ(net.link(static_cast<LinkId>(i)).latency, c.links()[i].latency);
  }
  EXPECT_THROW(c.install(net), std::logic_error);  // a second install would shift every id
}

TEST(Install, FlowOverTheNvSwitchTakesBytesOverBandwidthPlusLatency) {
  const Cluster c(preset("dgx-a100"));
  Simulator sim;
  FlowNetwork net(sim);
  c.install(net);
  Tick done = -1;
  net.start_flow(c.route(0, 1), 3e9, [&] { done = sim.now(); });  // 3 GB at 300 GB/s = 10 ms
  sim.run();
  EXPECT_NEAR(ticks_to_us(done), 10'000.0 + 1.4, 1e-3);
}

TEST(Route, OutOfRangeEndpointsThrow) {
  const Cluster c(preset("dgx-a100"));
  EXPECT_THROW(c.route(-1, 0), std::out_of_range);
  EXPECT_THROW(c.route(0, c.num_endpoints()), std::out_of_range);
}

TEST(ClusterSpec, InconsistentSpecsThrowNamingTheField) {
  auto expect_error = [](ClusterSpec s, const std::string& needle) {
    try {
      Cluster c(std::move(s));
      ADD_FAILURE() << "expected std::invalid_argument mentioning " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const ClusterSpec dgx = preset("dgx-a100");
  ClusterSpec s = dgx;
  s.nodes = 0;
  expect_error(s, "nodes");
  s = dgx;
  s.gpus_per_node = 0;
  expect_error(s, "gpus_per_node");
  s = dgx;
  s.gpus_per_pcie_switch = 3;
  expect_error(s, "multiple of gpus_per_pcie_switch");
  s = dgx;
  s.nvlink_bandwidth_GBps = 0;
  expect_error(s, "nvlink_bandwidth_GBps");
  s = dgx;
  s.socket_link_GBps = 0;
  expect_error(s, "socket_link_GBps");
  s = dgx;
  s.pcie_latency_us = -1;
  expect_error(s, "pcie_latency_us");
  s = dgx;
  s.nodes = 2;
  s.nics_per_node = 0;
  expect_error(s, "nics_per_node");
  s = dgx;
  s.nodes = 2;
  s.nic_bandwidth_Gbps = 0;
  expect_error(s, "nic_bandwidth_Gbps");
  s = preset("dgx1-v100");
  s.gpus_per_node = 4;
  expect_error(s, "hybrid-cube-mesh");
  // Every problem is reported at once.
  s = dgx;
  s.pcie_bandwidth_GBps = 0;
  s.pcie_uplink_GBps = 0;
  expect_error(s, "pcie_bandwidth_GBps");
  expect_error(s, "pcie_uplink_GBps");
}

TEST(ClusterSpec, FieldsOnlyCheckedWhereTheLinksExist) {
  ClusterSpec s = preset("a100-4gpu-pcie");
  s.nvlink_bandwidth_GBps = 0;  // no NVLink in a PCIe fabric
  s.socket_link_GBps = 0;       // one socket
  EXPECT_NO_THROW(Cluster{s});
  ClusterSpec mesh = preset("hgx-a100-4gpu-nvlink");
  mesh.gpus_per_node = 1;
  mesh.nvlink_bandwidth_GBps = 0;  // a one-GPU mesh has no NVLink
  EXPECT_NO_THROW(Cluster{mesh});
}

TEST(ClusterSpec, MoreNodesAndSocketsScaleTheGraph) {
  ClusterSpec s = preset("dgx-h100");
  s.nodes = 4;
  s.sockets = 4;  // four switches, one per socket; sockets fully connected
  const Cluster c(s);
  EXPECT_EQ(c.num_endpoints(), 36);
  EXPECT_EQ(c.node_of_endpoint(c.host_endpoint(3)), 3);
  EXPECT_EQ(hop_names(c, c.host_endpoint(0), 6),
            (std::vector<std::string>{"n0.cpu0->n0.cpu3", "n0.cpu3->n0.pcie3", "n0.pcie3->n0.gpu6"}));
  EXPECT_TRUE(crosses(c, 0, 31, LinkClass::kNetwork));
}

}  // namespace moesim

namespace moesim {

// GRACE-MoE's machines (§5.1): the 3090 server's PCIe at 4 GB/s per direction; the 4090 servers
// at 63 GB/s inside a node and joined by 25 GbE, which bottlenecks every cross-node route (the
// route leaves through the NIC behind the GPU's PCIe path).
TEST(ClusterPresets, GraceMoeMachines) {
  const Cluster c3090(cluster_presets().get("grace-rtx3090-8x").value);
  EXPECT_EQ(c3090.num_gpus(), 8);
  EXPECT_DOUBLE_EQ(c3090.route_bandwidth_Bps(0, 1), 4e9);
  for (const char* name : {"grace-rtx4090-2x2", "grace-rtx4090-2x4"}) {
    const Cluster c(cluster_presets().get(name).value);
    const int per_node = c.spec().gpus_per_node;
    EXPECT_EQ(c.num_nodes(), 2) << name;
    EXPECT_DOUBLE_EQ(c.spec().gpu.memory_bytes, 48e9) << name;
    EXPECT_DOUBLE_EQ(c.route_bandwidth_Bps(0, 1), 63e9) << name;
    EXPECT_DOUBLE_EQ(c.route_bandwidth_Bps(0, per_node), 25e9 / 8) << name;
    EXPECT_GT(c.route(c.gpu_endpoint(0), c.gpu_endpoint(per_node)).size(),
              c.route(c.gpu_endpoint(0), c.gpu_endpoint(1)).size())
        << name;
  }
}

}  // namespace moesim
