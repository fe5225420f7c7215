// Routes composed on demand (issue 13): they must equal the dense [src][dst] table the cluster
// used to precompute, on multi-node clusters where composition matters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "hardware/cluster.hpp"

namespace moesim {

namespace {

ClusterSpec preset(const char* name) { return cluster_presets().get(name).value; }

// FNV-1a over every route's length and link ids, pairs in (src, dst) order.
std::uint64_t route_digest(const Cluster& c, std::uint64_t& total_links) {
  std::uint64_t h = 1469598103934665603ULL;
  const auto mix = [&h](std::uint64_t v) {
    h ^= v;
    h *= 1099511628211ULL;
  };
  total_links = 0;
  for (int s = 0; s < c.num_endpoints(); ++s)
    for (int d = 0; d < c.num_endpoints(); ++d) {
      const std::vector<LinkId> r = c.route(s, d);
      mix(r.size());
      total_links += r.size();
      for (LinkId l : r) mix(l);
    }
  return h;
}

std::vector<std::string> hop_names(const Cluster& c, int src, int dst) {
  std::vector<std::string> out;
  for (LinkId l : c.route(src, dst)) out.push_back(c.links()[l].name);
  return out;
}

}  // namespace

// Digests of the dense table as the cluster built it before routes were composed on demand
// (commit 9d473f5, every (src, dst) route searched or joined up front), for multi-node clusters of
// each fabric and NIC layout: one NIC per GPU, one per PCIe switch pair, one per node. The DGX-1
// rows were re-recorded when GPU pairs without NVLink started to relay through a GPU (NCCL's NVB
// path) instead of crossing the sockets: 24 ordered pairs per node, 5 PCIe/socket hops -> 2.
TEST(ComposedRoutes, EqualTheDenseTableTheyReplace) {
  struct Case {
    const char* preset;
    int nodes;
    int nics;  ///< 0: the preset's
    std::uint64_t links;
    std::uint64_t digest;
  };
  const Case cases[] = {
      {"2x-dgx-h100", 3, 0, 3372, 0xbeeae1dfa592bab5ULL},
      {"2x-dgx-h100", 16, 0, 119072, 0x301330d17e1703b3ULL},
      {"dgx1-v100", 3, 0, 3276, 7575242859410552957ULL},
      {"dgx1-v100", 5, 2, 13200, 16307781653457198709ULL},
      {"pcie-8x-rtx3090", 3, 0, 4956, 0x797605ce9dda96f5ULL},
      {"dgx1-v100", 1, 0, 120, 15440724730574965669ULL},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.preset) + " x" + std::to_string(k.nodes));
    ClusterSpec s = preset(k.preset);
    s.nodes = k.nodes;
    if (k.nics > 0) s.nics_per_node = k.nics;
    const Cluster c(s);
    std::uint64_t links = 0;
    EXPECT_EQ(route_digest(c, links), k.digest);
    EXPECT_EQ(links, k.links);
  }
}

// The same routes written out independently for DGX H100 nodes: inside a node GPU i reaches GPU j
// through the NVSwitch plane; between nodes GPU i leaves through NIC i on its PCIe switch (i / 2)
// and enters the other node through that node's NIC j (rail-matched to the destination).
TEST(ComposedRoutes, DgxH100RailsByHand) {
  ClusterSpec s = preset("2x-dgx-h100");
  s.nodes = 5;
  const Cluster c(s);
  const auto gpu = [](int node, int i) { return "n" + std::to_string(node) + ".gpu" + std::to_string(i); };
  const auto pcie = [](int node, int i) { return "n" + std::to_string(node) + ".pcie" + std::to_string(i / 2); };
  const auto nic = [](int node, int i) { return "n" + std::to_string(node) + ".nic" + std::to_string(i); };
  for (int a = 0; a < c.num_gpus(); ++a) {
    for (int b = 0; b < c.num_gpus(); ++b) {
      const int na = a / 8, ia = a % 8, nb = b / 8, ib = b % 8;
      std::vector<std::string> want;
      if (a == b) {
      } else if (na == nb) {
        want = {gpu(na, ia) + "->n" + std::to_string(na) + ".nvswitch",
                "n" + std::to_string(na) + ".nvswitch->" + gpu(nb, ib)};
      } else {
        want = {gpu(na, ia) + "->" + pcie(na, ia), pcie(na, ia) + "->" + nic(na, ia), nic(na, ia) + "->net",
                "net->" + nic(nb, ib),           nic(nb, ib) + "->" + pcie(nb, ib), pcie(nb, ib) + "->" + gpu(nb, ib)};
      }
      ASSERT_EQ(hop_names(c, a, b), want) << a << " -> " << b;
    }
  }
}

// route_into reuses the caller's buffer and writes what route returns; bandwidth and latency are
// those of the composed links.
TEST(ComposedRoutes, RouteIntoMatchesRouteAndReplacesTheBuffer) {
  ClusterSpec s = preset("dgx1-v100");
  s.nodes = 3;
  const Cluster c(s);
  std::vector<LinkId> buf{999, 998, 997, 996, 995, 994, 993, 992, 991, 990};
  for (int a = 0; a < c.num_endpoints(); ++a) {
    for (int b = 0; b < c.num_endpoints(); ++b) {
      c.route_into(a, b, buf);
      const std::vector<LinkId> r = c.route(a, b);
      ASSERT_EQ(buf, r) << a << " -> " << b;
      double bw = r.empty() ? std::numeric_limits<double>::infinity() : c.links()[r[0]].bandwidth_Bps;
      Tick lat = 0;
      for (LinkId l : r) {
        bw = std::min(bw, c.links()[l].bandwidth_Bps);
        lat += c.links()[l].latency;
      }
      EXPECT_EQ(c.route_bandwidth_Bps(a, b), bw);
      EXPECT_EQ(c.route_latency(a, b), lat);
    }
  }
  EXPECT_THROW(c.route_into(0, c.num_endpoints(), buf), std::out_of_range);
}

}  // namespace moesim
