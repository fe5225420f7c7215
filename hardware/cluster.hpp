#pragma once
// Cluster topology: GPUs, NVSwitches, PCIe switches, CPUs (host memory) and NICs as a Boost.Graph
// graph of directed links. Routes between endpoints are searched per node at build time and composed
// on demand, so a cluster's memory grows with its size rather than with its square.
#include <memory>
#include <string>
#include <vector>

#include "hardware/calibration.hpp"
#include "hardware/gpu_spec.hpp"
#include "sim/network_backend.hpp"
#include "core/registry.hpp"

namespace moesim {

/// How the GPUs inside one node are wired together.
enum class Fabric {
  kNvSwitch,        ///< every GPU to an NVSwitch plane (DGX A100/H100): nvlink_bandwidth per GPU
  kNvLinkMesh,      ///< every GPU pair directly linked: nvlink_bandwidth per pair
  kHybridCubeMesh,  ///< DGX-1 V100 wiring: 1 or 2 NVLink bricks per linked pair, PCIe otherwise
  kPcie,            ///< no NVLink: GPU traffic crosses PCIe switches (and the CPU when needed)
};
const char* fabric_name(Fabric f);
bool parse_fabric(const std::string& s, Fabric& out);

/// Everything needed to build a cluster. Presets are values of this; YAML overrides fields.
/// Bandwidths are per direction. Defaults (used by a cluster written out without a preset) are
/// those of the presets: PCIe gen4, the latencies and NCCL launch cost fitted in cluster_presets.cpp.
struct ClusterSpec {
  std::string name;
  GpuSpec gpu;
  int nodes = 1;
  int gpus_per_node = 8;
  Fabric fabric = Fabric::kNvSwitch;
  double nvlink_bandwidth_GBps = 0.0;  ///< meaning depends on fabric (see Fabric)
  double nvlink_latency_us = 0.7;      ///< per hop
  double pcie_bandwidth_GBps = 31.5;   ///< GPU ↔ PCIe switch (default: gen4 x16)
  double pcie_latency_us = 1.0;        ///< per hop
  int gpus_per_pcie_switch = 2;
  double pcie_uplink_GBps = 31.5;      ///< PCIe switch ↔ CPU root port
  int sockets = 2;                     ///< CPUs per node; PCIe switches are spread over them
  double socket_link_GBps = 64.0;      ///< CPU ↔ CPU (QPI/UPI/xGMI)
  double nic_bandwidth_Gbps = 0.0;     ///< per NIC (Gbit/s); 0 with nodes == 1 means none
  int nics_per_node = 0;               ///< NICs sit on the PCIe switches, spread evenly
  double nic_latency_us = 2.5;         ///< NIC ↔ network switch hop
  /// Fixed software cost of one collective call under collective_model "line-rate" (fitted to
  /// small messages, cluster_presets.cpp). The "nccl" model prices the launch with NCCL's own
  /// base and per-step latencies instead and adds nothing for this field.
  double collective_launch_us = 7.0;
  /// The host CPU's speed relative to the hosts that host work's reference times come from
  /// (hardware/host_cost.hpp): a host task takes its reference time / host_speed.
  double host_speed = 1.0;
  /// How collectives are priced (collectives.hpp): "nccl" = the algorithm and protocol NCCL's
  /// tuning model picks for the size, at NCCL's achievable link rates (nccl_tuning.hpp);
  /// "line-rate" = rings at nominal link rates after collective_launch_us (moesim before 0.6,
  /// and the baseline a calibration profile's efficiencies are measured against).
  std::string collective_model = "nccl";
  /// The host CPU vendor, "amd" or "intel": NCCL's multi-node tables and per-step network
  /// overhead depend on it (nccl_tuning.cpp).
  std::string cpu_vendor = "intel";
  /// Network backend timing transfers (make_network): "flow" (max-min fair sharing, exact for
  /// overlapping traffic) or "analytic" (per-tick groups priced from link loads, for big clusters).
  std::string network_model = "flow";
  /// Flow backend only: when the earliest flow completes, every flow due within this many
  /// microseconds completes with it, so they share one max-min recomputation (sim/flow_network.hpp).
  /// 0 = exact (one tick). An approximation, off by default: flows finish up to this much early.
  double flow_completion_window_us = 0.0;
  /// How an all-to-all is planned (collectives.hpp): "flows" = one transfer per GPU pair, timed
  /// by the network backend; "closed-form" = one task per GPU, its call's end worked out when the
  /// plan is built from the all-to-all's link loads (the analytic backend's rule for a group of
  /// flows, hardware/closed_form_all_to_all.hpp). An approximation for large runs, off by default.
  std::string all_to_all_model = "flows";
  /// How compute is priced (ComputeCostModel): "roofline" (the slower of FLOPs and memory traffic,
  /// with tile and k-loop losses) or "flops-only" (time proportional to FLOPs at peak efficiency:
  /// the assumption of MoE-GPS §2 and §5 that compute is saturated).
  std::string compute_model = "roofline";
  /// Measured efficiencies replacing the defaults where they have data (null: uncalibrated).
  /// Scenarios and `moesim cost` attach the built-in kernel profile of the GPU's architecture by
  /// default (hardware/builtin_calibration.hpp); presets themselves carry none.
  std::shared_ptr<const HardwareCalibration> calibration;
  /// Whose kernels the calibration's GEMM fits are read for: the serving engine ("trtllm",
  /// "sglang", "vllm"); TensorRT-LLM's for scenarios that name no such engine.
  std::string kernel_engine = "trtllm";
  /// FP8 GEMMs run the 128-block-scale kernels (the model's checkpoint says so: ModelSpec).
  bool fp8_block_scales = false;
  /// Intra-node all-reduces run the engine's own one-shot/two-shot kernels (`kernel_engine`'s
  /// custom all-reduce, priced by the calibration's "custom_all_reduce.<engine>" curves) instead of
  /// NCCL: what TensorRT-LLM, vLLM and SGLang do by default for tensor-parallel all-reduces.
  bool custom_all_reduce = false;

  int num_gpus() const { return nodes * gpus_per_node; }
};

/// Attaches a profile to a cluster: GEMM and collective efficiencies, and the fitted host-link
/// bandwidth (h2d_pinned → pcie_bandwidth_GBps) where the profile measured it.
void apply_calibration(ClusterSpec& spec, HardwareCalibration profile);

/// Registry of cluster presets ("dgx-a100", "dgx1-v100", ...).
Registry<ClusterSpec>& cluster_presets();

enum class LinkClass { kNvLink, kPcie, kSocket, kNetwork };
const char* link_class_name(LinkClass c);

/// A built topology with its routes. Endpoints are GPUs [0, G) and host memories [G, G + nodes):
/// one per node (the CPU its PCIe tree hangs from).
class Cluster {
 public:
  /// Builds the graph and all routes. Throws std::invalid_argument on an inconsistent spec
  /// (the scenario validator reports these as input errors before building).
  explicit Cluster(ClusterSpec spec);
  ~Cluster();
  Cluster(Cluster&&) noexcept;
  Cluster& operator=(Cluster&&) noexcept;

  const ClusterSpec& spec() const { return spec_; }
  int num_gpus() const { return spec_.num_gpus(); }
  int num_nodes() const { return spec_.nodes; }
  int node_of_gpu(int gpu) const { return gpu / spec_.gpus_per_node; }
  int gpu_endpoint(int gpu) const { return gpu; }
  int host_endpoint(int node) const { return num_gpus() + node; }
  int num_endpoints() const { return num_gpus() + num_nodes(); }
  int node_of_endpoint(int ep) const { return ep < num_gpus() ? node_of_gpu(ep) : ep - num_gpus(); }

  struct LinkInfo {
    std::string name;  ///< e.g. "gpu0->nvswitch0"
    LinkClass cls;
    double bandwidth_Bps;
    Tick latency;
  };
  const std::vector<LinkInfo>& links() const { return links_; }
  /// Directed links from endpoint `src` to endpoint `dst` (empty when src == dst).
  std::vector<LinkId> route(int src, int dst) const;
  /// The same route written into `out` (its contents replaced): no allocation once `out` has
  /// grown, for callers that route every transfer (the plan executor).
  void route_into(int src, int dst, std::vector<LinkId>& out) const;
  /// Adds every link to `net` so that LinkId == index in links().
  void install(NetworkBackend& net) const;
  /// The narrowest link bandwidth on a route (bytes/s); infinity for an empty route.
  double route_bandwidth_Bps(int src, int dst) const;
  /// The sum of the per-hop latencies on a route (0 for an empty route).
  Tick route_latency(int src, int dst) const;
  /// A human-readable description of vertices and links.
  std::string describe() const;

  /// NCCL's point-to-point figures (what a send costs apart from its size) that the pricing in
  /// hardware/collectives.cpp works out once per cluster instead of once per message: by class
  /// of route for all-to-alls (crossing nodes or not, protocol, local pair), and by GPU pair and
  /// protocol for single sends on clusters small enough to hold every pair. The memos are the
  /// cluster's, like its routes: a cluster belongs to one run and is not shared between threads.
  struct P2pFigures {
    double latency_us = 0.0;
    double alg_GBps = 0.0;
    double route_Bps = 0.0;
    bool known = false;
  };
  std::vector<P2pFigures>& p2p_memo() const { return p2p_memo_; }
  std::vector<P2pFigures>& p2p_pair_memo() const { return p2p_pair_memo_; }

  /// The pieces of the route from `src` to `dst`: within a node, `*inside`; between nodes, `*head`,
  /// the two network links and `*tail` (a route between nodes is head + up + down + tail, where
  /// head and up depend only on src, down and tail only on dst).
  struct RouteParts {
    const std::vector<LinkId>* inside = nullptr;
    const std::vector<LinkId>* head = nullptr;
    LinkId up = 0, down = 0;
    const std::vector<LinkId>* tail = nullptr;
  };
  RouteParts route_parts(int src, int dst) const;

 private:
  struct Graph;  // Boost.Graph adjacency list, kept out of the header
  void compute_routes();
  /// Replaces `route` (cost `cost`) between two GPU vertices of one node with a relay through a
  /// third GPU over NVLink, NCCL's NVB path, where the pair has no NVLink and that is cheaper.
  void nvlink_relay(std::size_t src, std::size_t dst, double cost, std::vector<LinkId>& route) const;
  void check_endpoints(int src, int dst) const;
  /// Calls f(link) for each link of the route from `src` to `dst`, in order.
  template <class F>
  void for_each_link(int src, int dst, F&& f) const;
  /// An endpoint's index within its node: GPUs 0..gpus_per_node-1, the host gpus_per_node.
  int local_index(int ep) const { return ep < num_gpus() ? ep % spec_.gpus_per_node : spec_.gpus_per_node; }

  ClusterSpec spec_;
  std::vector<LinkInfo> links_;
  // The pieces routes are composed from (see compute_routes): O(nodes · gpus_per_node²) paths.
  std::vector<std::vector<LinkId>> local_;      ///< [node][src local][dst local]: inside one node
  std::vector<int> node_of_, local_of_;         ///< per endpoint: its node and local index
  std::vector<std::vector<LinkId>> to_rail_;    ///< per endpoint: links to its rail NIC
  std::vector<std::vector<LinkId>> from_rail_;  ///< per endpoint: links from its rail NIC to it
  std::vector<LinkId> rail_up_, rail_down_;     ///< per endpoint: its rail NIC's links to and from the network
  std::unique_ptr<Graph> graph_;
  mutable std::vector<P2pFigures> p2p_memo_, p2p_pair_memo_;
};

}  // namespace moesim
