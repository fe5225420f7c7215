#pragma once
// Internal pieces of the cluster builder (hardware/cluster.cpp): vertex kinds and names, the DGX-1
// NVLink wiring table, spec validation and the text description. Not part of the public API.
#include <string>
#include <vector>

#include "hardware/cluster.hpp"

namespace moesim::topology {

enum class VertexKind { kGpu, kNvSwitch, kPcieSwitch, kCpu, kNic, kNetSwitch };
inline constexpr int kNumVertexKinds = 6;
const char* vertex_kind_name(VertexKind k);

/// A vertex of the topology graph. `node` is -1 for the network switch that joins the nodes.
struct VertexProps {
  VertexKind kind = VertexKind::kGpu;
  int node = 0;
  int index = 0;  ///< index among the vertices of this kind in its node
  std::string name;
};

/// A directed edge: the FlowNetwork link it stands for and its route-search cost (seconds).
struct EdgeProps {
  LinkId link = 0;
  double weight = 0.0;
};

/// "n0.gpu3", "n1.pcie0", "n0.nvswitch", "net", ...
std::string vertex_name(VertexKind kind, int node, int index);

/// One NVLink connection of the DGX-1 hybrid cube-mesh: GPUs a and b joined by `bricks` links.
struct NvLinkBricks {
  int a, b, bricks;
};
/// The DGX-1 (V100) wiring: 16 GPU pairs, every GPU with 6 bricks in all.
const std::vector<NvLinkBricks>& dgx1_nvlink_bricks();

/// Throws std::invalid_argument listing every inconsistency in `spec`.
void validate(const ClusterSpec& spec);

/// The multi-line summary behind Cluster::describe(); `vertex_counts` is indexed by VertexKind.
std::string describe(const ClusterSpec& spec, const std::vector<int>& vertex_counts,
                     const std::vector<Cluster::LinkInfo>& links);

}  // namespace moesim::topology
