// Internal pieces of the cluster builder: names, the DGX-1 wiring table, validation, description.
#include "hardware/cluster_topology.hpp"

#include <cmath>
#include <map>
#include <sstream>
#include <stdexcept>

namespace moesim::topology {

const char* vertex_kind_name(VertexKind k) {
  switch (k) {
    case VertexKind::kGpu: return "gpu";
    case VertexKind::kNvSwitch: return "nvswitch";
    case VertexKind::kPcieSwitch: return "pcie";
    case VertexKind::kCpu: return "cpu";
    case VertexKind::kNic: return "nic";
    case VertexKind::kNetSwitch: return "net";
  }
  return "?";
}

std::string vertex_name(VertexKind kind, int node, int index) {
  if (kind == VertexKind::kNetSwitch) return "net";
  std::string name = "n" + std::to_string(node) + "." + vertex_kind_name(kind);
  // There is one NVSwitch plane per node: its name needs no index.
  if (kind != VertexKind::kNvSwitch) name += std::to_string(index);
  return name;
}

const std::vector<NvLinkBricks>& dgx1_nvlink_bricks() {
  // NVIDIA DGX-1 with Tesla V100 system architecture whitepaper (WP-08437-002), figure 4, and
  // `nvidia-smi topo -m` on a DGX-1V: NV2 = two bricks, NV1 = one; unlisted pairs (e.g. 0-5,
  // 0-6, 0-7) have no NVLink and talk over PCIe through the CPUs.
  static const std::vector<NvLinkBricks> bricks = {
      {0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {0, 4, 2},  //
      {1, 2, 2}, {1, 3, 1}, {1, 5, 2},             //
      {2, 3, 2}, {2, 6, 1},                        //
      {3, 7, 1},                                   //
      {4, 5, 1}, {4, 6, 1}, {4, 7, 2},             //
      {5, 6, 2}, {5, 7, 1},                        //
      {6, 7, 2},
  };
  return bricks;
}

namespace {
std::string num(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}
}  // namespace

void validate(const ClusterSpec& s) {
  std::vector<std::string> errors;
  auto need = [&](bool ok, std::string message) {
    if (!ok) errors.push_back(std::move(message));
  };
  // The isfinite checks also reject NaN and infinity.
  auto positive = [&](double v, const char* key, const char* why) {
    need(v > 0.0 && std::isfinite(v),
         std::string(key) + " must be > 0 " + why + " (got " + num(v) + ")");
  };
  auto non_negative = [&](double v, const char* key) {
    need(v >= 0.0 && std::isfinite(v), std::string(key) + " must be >= 0 (got " + num(v) + ")");
  };

  need(s.nodes >= 1, "nodes must be >= 1 (got " + std::to_string(s.nodes) + ")");
  need(s.gpus_per_node >= 1, "gpus_per_node must be >= 1 (got " + std::to_string(s.gpus_per_node) + ")");
  need(s.sockets >= 1, "sockets must be >= 1 (got " + std::to_string(s.sockets) + ")");
  if (s.gpus_per_pcie_switch < 1) {
    need(false, "gpus_per_pcie_switch must be >= 1 (got " + std::to_string(s.gpus_per_pcie_switch) + ")");
  } else if (s.gpus_per_node >= 1) {
    need(s.gpus_per_node % s.gpus_per_pcie_switch == 0,
         "gpus_per_node (" + std::to_string(s.gpus_per_node) +
             ") must be a multiple of gpus_per_pcie_switch (" + std::to_string(s.gpus_per_pcie_switch) + ")");
  }
  if (s.fabric == Fabric::kHybridCubeMesh)
    need(s.gpus_per_node == 8, "the hybrid-cube-mesh fabric (DGX-1) wires exactly 8 GPUs per node (got " +
                                   std::to_string(s.gpus_per_node) + ")");
  const bool has_nvlink = s.fabric == Fabric::kNvSwitch || s.fabric == Fabric::kHybridCubeMesh ||
                          (s.fabric == Fabric::kNvLinkMesh && s.gpus_per_node > 1);
  if (has_nvlink) positive(s.nvlink_bandwidth_GBps, "nvlink_bandwidth_GBps", "for an NVLink fabric");
  positive(s.pcie_bandwidth_GBps, "pcie_bandwidth_GBps", "(every GPU has a PCIe link)");
  positive(s.pcie_uplink_GBps, "pcie_uplink_GBps", "(every PCIe switch has a CPU uplink)");
  if (s.sockets > 1) positive(s.socket_link_GBps, "socket_link_GBps", "with more than one socket");
  need(s.nics_per_node >= 0, "nics_per_node must be >= 0 (got " + std::to_string(s.nics_per_node) + ")");
  if (s.nodes > 1) {
    need(s.nics_per_node >= 1, "nodes > 1 needs nics_per_node >= 1 to join the nodes");
    positive(s.nic_bandwidth_Gbps, "nic_bandwidth_Gbps", "when nodes > 1");
  }
  non_negative(s.nvlink_latency_us, "nvlink_latency_us");
  non_negative(s.pcie_latency_us, "pcie_latency_us");
  non_negative(s.nic_latency_us, "nic_latency_us");
  non_negative(s.collective_launch_us, "collective_launch_us");

  if (errors.empty()) return;
  std::string msg = "invalid cluster '" + s.name + "': ";
  for (std::size_t i = 0; i < errors.size(); ++i) msg += (i ? "; " : "") + errors[i];
  throw std::invalid_argument(msg);
}

std::string describe(const ClusterSpec& s, const std::vector<int>& vertex_counts,
                     const std::vector<Cluster::LinkInfo>& links) {
  std::ostringstream out;
  out << "cluster '" << s.name << "': " << s.nodes << " node(s) x " << s.gpus_per_node << " " << s.gpu.name
      << ", fabric " << fabric_name(s.fabric) << "\n";

  static const char* const kLabels[kNumVertexKinds] = {"gpu", "nvswitch", "pcie-switch", "cpu", "nic",
                                                       "network-switch"};
  out << "  vertices:";
  for (int k = 0; k < kNumVertexKinds; ++k) out << (k ? ", " : " ") << vertex_counts[k] << " " << kLabels[k];
  out << "\n";
  const int gpus = s.num_gpus();
  out << "  endpoints: GPUs 0-" << gpus - 1 << ", host memory " << gpus;
  if (s.nodes > 1) out << "-" << gpus + s.nodes - 1;
  out << " (cpu0 of each node)\n";
  if (s.nodes == 1 && s.nics_per_node > 0)
    out << "  NICs: " << s.nics_per_node << " x " << s.nic_bandwidth_Gbps
        << " Gb/s per node, built only when nodes > 1\n";

  // Directed link counts per class, grouped by bandwidth.
  const LinkClass classes[] = {LinkClass::kNvLink, LinkClass::kPcie, LinkClass::kSocket,
                               LinkClass::kNetwork};
  out << "  links (directed, per-direction bandwidth):\n";
  for (LinkClass c : classes) {
    std::map<double, int> by_bw;
    Tick latency = 0;
    for (const auto& l : links) {
      if (l.cls != c) continue;
      ++by_bw[l.bandwidth_Bps];
      latency = l.latency;
    }
    if (by_bw.empty()) continue;
    int total = 0;
    for (const auto& [bw, n] : by_bw) total += n;
    out << "    " << link_class_name(c) << ": " << total << " links,";
    const char* sep = " ";
    for (auto it = by_bw.rbegin(); it != by_bw.rend(); ++it) {
      out << sep << it->second << " x " << it->first / 1e9 << " GB/s";
      sep = ", ";
    }
    out << "; " << ticks_to_us(latency) << " us per hop\n";
  }
  out << "  collective launch: " << s.collective_launch_us << " us\n";
  return out.str();
}

}  // namespace moesim::topology
