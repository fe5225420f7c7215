// Cluster presets: real machines and the setups of the papers moesim reproduces.
//
// Bandwidths are nominal per-direction link rates (PCIe after 128b/130b encoding, NVLink per
// link, NIC line rate); the achievable fractions belong to the cost models, not to the topology.
//
// Latencies shared by every preset, chosen so that the flow model reproduces small-message NCCL
// times measured on A100 (../shared/data/measured/a100/, see its README):
//  - nvlink_latency_us = 0.7 per hop (GPU->NVSwitch->GPU is 1.4 us).
//  - pcie_latency_us = 1.0 per hop: switch traversal is ~0.1-0.2 us, the rest is DMA setup.
//  - nic_latency_us = 2.5 per NIC<->switch hop on InfiniBand (NIC + switch + wire).
//  - collective_launch_us = 7: NCCL's fixed per-call cost. Fitted to the smallest messages:
//      4x A100 NVLink all-reduce, 8 B: 12.5 us measured; ring of 6 steps x 0.7 us + 7 = 11.2 us;
//      DGX A100 2-GPU all-reduce, 2 KB: 10 us measured; 2 steps x 1.4 us + 7 = 9.8 us;
//      DGX A100 2-GPU send/recv, 2 KB: 8 us measured; 1.4 us + 7 = 8.4 us;
//      2x DGX A100 send/recv, 2 KB: 16 us min measured; 4 PCIe hops x 1 + 2 x 2.5 + 7 = 16 us.
//    (The 2-node all-reduce rows, 31 us min, include PyTorch overhead the 2-GPU rows do not.)
#include <utility>

#include "hardware/cluster.hpp"

namespace moesim {

namespace {

constexpr double kPcieGen3 = 15.75;  // GB/s per direction, x16 (see pcie_x16_bandwidth_Bps)
constexpr double kPcieGen4 = 31.5;
constexpr double kPcieGen5 = 63.0;

const GpuSpec& gpu(const char* name) { return gpu_presets().get(name).value; }

/// Fields every preset shares; each preset then sets its own topology.
ClusterSpec base(const char* name, const char* gpu_name) {
  ClusterSpec c;
  c.name = name;
  c.gpu = gpu(gpu_name);
  c.nvlink_latency_us = 0.7;
  c.pcie_latency_us = 1.0;
  c.nic_latency_us = 2.5;
  c.collective_launch_us = 7.0;
  return c;
}

// NVIDIA DGX-1 with Tesla V100 System Architecture whitepaper (WP-08437-002): hybrid cube-mesh of
// NVLink2 bricks at 25 GB/s per direction (wiring in cluster_topology.cpp), four PLX PCIe gen3
// switches each with 2 GPUs and one 100 Gb/s EDR InfiniBand NIC, two Xeon E5-2698 v4 joined by
// two QPI links at 9.6 GT/s (2 x 19.2 = 38.4 GB/s per direction, Intel ARK). HarMoEny's machine.
ClusterSpec dgx1_v100() {
  ClusterSpec c = base("dgx1-v100", "V100-SXM2-32GB");
  c.gpus_per_node = 8;
  c.fabric = Fabric::kHybridCubeMesh;
  c.nvlink_bandwidth_GBps = 25.0;  // per brick
  c.pcie_bandwidth_GBps = kPcieGen3;
  c.gpus_per_pcie_switch = 2;
  c.pcie_uplink_GBps = kPcieGen3;
  c.sockets = 2;
  c.socket_link_GBps = 38.4;
  c.cpu_vendor = "intel";
  c.nics_per_node = 4;
  c.nic_bandwidth_Gbps = 100.0;
  return c;
}

// NVIDIA DGX A100 System Architecture whitepaper (WP-10083-001): six NVSwitches, 12 NVLink3 links
// per GPU = 300 GB/s per direction; four PCIe gen4 switches each with 2 GPUs and 2 ConnectX-6
// 200 Gb/s HDR NICs; two AMD EPYC 7742 joined by 4 xGMI-2 x16 links at 18 GT/s (4 x 36 GB/s).
ClusterSpec dgx_a100(int nodes) {
  ClusterSpec c = base(nodes == 1 ? "dgx-a100" : "2x-dgx-a100", "A100-SXM4-80GB");
  c.nodes = nodes;
  c.gpus_per_node = 8;
  c.fabric = Fabric::kNvSwitch;
  c.nvlink_bandwidth_GBps = 300.0;
  c.pcie_bandwidth_GBps = kPcieGen4;
  c.gpus_per_pcie_switch = 2;
  c.pcie_uplink_GBps = kPcieGen4;
  c.sockets = 2;
  c.socket_link_GBps = 144.0;
  c.cpu_vendor = "amd";
  c.nics_per_node = 8;
  c.nic_bandwidth_Gbps = 200.0;
  return c;
}

// NVIDIA DGX H100 user guide and datasheet: four NVSwitch chips, 18 NVLink4 links per GPU =
// 450 GB/s per direction; PCIe gen5 switches with 2 GPUs and 2 ConnectX-7 400 Gb/s NDR NICs each
// (eight compute NICs); two Xeon Platinum 8480C joined by 4 UPI 2.0 links at 16 GT/s (4 x 32 GB/s).
ClusterSpec dgx_h100(int nodes) {
  ClusterSpec c = base(nodes == 1 ? "dgx-h100" : "2x-dgx-h100", "H100-SXM-80GB");
  c.nodes = nodes;
  c.gpus_per_node = 8;
  c.fabric = Fabric::kNvSwitch;
  c.nvlink_bandwidth_GBps = 450.0;
  c.pcie_bandwidth_GBps = kPcieGen5;
  c.gpus_per_pcie_switch = 2;
  c.pcie_uplink_GBps = kPcieGen5;
  c.sockets = 2;
  c.socket_link_GBps = 128.0;
  c.cpu_vendor = "intel";
  c.nics_per_node = 8;
  c.nic_bandwidth_Gbps = 400.0;
  return c;
}

// NVIDIA DGX H200 datasheet: the DGX H100 chassis (four NVSwitch chips, 18 NVLink4 links per GPU
// = 900 GB/s bidirectional, 450 per direction; 8 ConnectX-7 400 Gb/s compute NICs; two Xeon
// Platinum 8480C; PCIe gen5) with 8x H200 141GB.
ClusterSpec dgx_h200() {
  ClusterSpec c = dgx_h100(1);
  c.name = "dgx-h200";
  c.gpu = gpu("H200-141GB");
  return c;
}

// H800 servers as DeepSeek describes its own (DeepSeek-V3 report §3.1; DeepEP README: "H800,
// ~160 GB/s NVLink maximum bandwidth" achieved, CX7 InfiniBand 400 Gb/s RDMA NICs, one per GPU):
// an HGX H800 board (NVSwitch, 400 GB/s bidirectional NVLink = 200 per direction) in a host like
// DGX H100's (PCIe gen5 switches with 2 GPUs and 2 NICs each, two Xeon sockets).
ClusterSpec dgx_h800() {
  ClusterSpec c = dgx_h100(1);
  c.name = "dgx-h800";
  c.gpu = gpu("H800-SXM-80GB");
  c.nvlink_bandwidth_GBps = 200.0;
  return c;
}

// HGX H20 (product brief: NVLink 900 GB/s bidirectional per GPU, PCIe gen5) in a DGX-H100-like
// host with 8 ConnectX-7 400 Gb/s NICs.
ClusterSpec hgx_h20() {
  ClusterSpec c = dgx_h100(1);
  c.name = "hgx-h20";
  c.gpu = gpu("H20-96GB");
  return c;
}

// NVIDIA DGX B200 datasheet and user guide: 8x B200 on two NVLink 5 switch chips, 18 links per
// GPU = 1.8 TB/s bidirectional (900 GB/s per direction); 8 single-port ConnectX-7 400 Gb/s compute
// NICs behind PCIe gen5 switches (2 GPUs and 2 NICs each); two Xeon Platinum 8570 joined by 4 UPI
// 2.0 links at 20 GT/s (4 x 40 GB/s).
ClusterSpec dgx_b200() {
  ClusterSpec c = dgx_h100(1);
  c.name = "dgx-b200";
  c.gpu = gpu("B200-180GB");
  c.nvlink_bandwidth_GBps = 900.0;
  c.socket_link_GBps = 160.0;
  return c;
}

// GB200 / GB300 NVL72 (NVIDIA GB200 NVL72 and GB300 NVL72 datasheets; "NVIDIA GB200 NVL72"
// technical overview): one rack is one NVLink domain of 72 GPUs, 18 compute trays of 2 Grace
// CPUs + 4 Blackwell GPUs, all 72 GPUs on 9 NVLink switch trays at 1.8 TB/s bidirectional per GPU
// (one NVSwitch plane here, 900 GB/s per direction). Each Grace reaches its two GPUs over
// NVLink-C2C at 900 GB/s bidirectional (450 per direction, shared by the two: a "switch" of two
// GPUs with a 450 GB/s uplink to its Grace). One scale-out NIC per GPU: ConnectX-7 400 Gb/s on
// GB200, ConnectX-8 800 Gb/s on GB300. Racks are joined over InfiniBand (`nodes` counts racks).
// Grace-to-Grace traffic between superchips leaves through the trays' network, so the 36 sockets
// are joined at one NIC's rate.
ClusterSpec nvl72(const char* name, const char* gpu_name, double nic_Gbps) {
  ClusterSpec c = base(name, gpu_name);
  c.gpus_per_node = 72;
  c.fabric = Fabric::kNvSwitch;
  c.nvlink_bandwidth_GBps = 900.0;
  c.pcie_bandwidth_GBps = 450.0;
  c.gpus_per_pcie_switch = 2;
  c.pcie_uplink_GBps = 450.0;
  c.sockets = 36;
  c.socket_link_GBps = nic_Gbps / 8.0;
  c.cpu_vendor = "intel";  // NCCL's tuning only distinguishes AMD from the rest.
  c.nics_per_node = 72;
  c.nic_bandwidth_Gbps = nic_Gbps;
  return c;
}

// MoE-GPS's NVLink setup: four A100s fully connected. On an HGX A100 4-GPU board each GPU splits
// its 12 NVLink3 links 4/4/4 over its three peers: 4 x 25 = 100 GB/s per pair per direction (HGX
// A100 4-GPU product brief). (MoE-GPS itself assumes an idealised 2 TB/s.) Host side as in
// MoEShard's 4x A100 machine: one EPYC socket, each GPU on its own gen4 x16 root port.
ClusterSpec hgx_a100_4gpu_nvlink() {
  ClusterSpec c = base("hgx-a100-4gpu-nvlink", "A100-SXM4-40GB");
  c.gpus_per_node = 4;
  c.fabric = Fabric::kNvLinkMesh;
  c.nvlink_bandwidth_GBps = 100.0;
  c.pcie_bandwidth_GBps = kPcieGen4;
  c.gpus_per_pcie_switch = 1;
  c.pcie_uplink_GBps = kPcieGen4;
  c.sockets = 1;
  c.cpu_vendor = "amd";
  return c;
}

// MoE-GPS's PCIe setup: four A100s with no NVLink on PCIe 4.0 (32 GB/s). The GPU model is the
// SXM4 preset: what this preset is about is the interconnect. All four GPUs sit under one gen4
// switch whose x16 uplink they share for host traffic.
ClusterSpec a100_4gpu_pcie() {
  ClusterSpec c = base("a100-4gpu-pcie", "A100-SXM4-40GB");
  c.gpus_per_node = 4;
  c.fabric = Fabric::kPcie;
  c.pcie_bandwidth_GBps = kPcieGen4;
  c.gpus_per_pcie_switch = 4;
  c.pcie_uplink_GBps = kPcieGen4;
  c.sockets = 1;
  c.cpu_vendor = "amd";
  return c;
}

// A typical 8-GPU GeForce server (e.g. dual EPYC 7002 boards with two gen4 switches of 4 GPUs):
// GeForce cards have no NVLink between more than two cards, so all GPU traffic is PCIe; half of
// it crosses the 4-link xGMI socket interconnect. One 25 GbE NIC as in GRACE-MoE's servers,
// whose NCCL socket transport costs far more per hop than InfiniBand. GRACE-MoE reports its 3090
// server's PCIe at 4 GB/s per direction: override pcie_bandwidth_GBps to reproduce it.
ClusterSpec pcie_8x(const char* name, const char* gpu_name) {
  ClusterSpec c = base(name, gpu_name);
  c.gpus_per_node = 8;
  c.fabric = Fabric::kPcie;
  c.pcie_bandwidth_GBps = kPcieGen4;
  c.gpus_per_pcie_switch = 4;
  c.pcie_uplink_GBps = kPcieGen4;
  c.sockets = 2;
  c.socket_link_GBps = 144.0;
  c.cpu_vendor = "amd";
  c.nics_per_node = 1;
  c.nic_bandwidth_Gbps = 25.0;
  c.nic_latency_us = 5.0;
  return c;
}

// GRACE-MoE's machines as its §5.1 states them: one server of 8x RTX 3090 whose PCIe carries
// 4 GB/s per direction, and servers of RTX 4090 (48 GB cards) on PCIe 4.0 at 63 GB/s per
// direction, joined by 25 Gb Ethernet, used as 2 nodes x 2 GPUs and 2 nodes x 4 GPUs.
ClusterSpec grace_rtx3090() {
  ClusterSpec c = pcie_8x("grace-rtx3090-8x", "RTX-3090");
  c.pcie_bandwidth_GBps = 4.0;
  c.pcie_uplink_GBps = 4.0;
  return c;
}

ClusterSpec grace_rtx4090(const char* name, int gpus_per_node) {
  ClusterSpec c = pcie_8x(name, "RTX-4090");
  c.gpu.memory_bytes = 48e9;
  c.nodes = 2;
  c.gpus_per_node = gpus_per_node;
  c.gpus_per_pcie_switch = gpus_per_node;
  c.pcie_bandwidth_GBps = 63.0;
  c.pcie_uplink_GBps = 63.0;
  c.sockets = 1;
  return c;
}

void add(Registry<ClusterSpec>& r, const char* description, ClusterSpec c) {
  std::string name = c.name;
  r.add(std::move(name), description, std::move(c));
}

void register_presets(Registry<ClusterSpec>& r) {
  add(r, "DGX-1: 8x V100-SXM2-32GB, hybrid cube-mesh NVLink2 (25 GB/s per brick), PCIe gen3, 2 sockets",
      dgx1_v100());
  add(r, "DGX A100: 8x A100-SXM4-80GB, NVSwitch 300 GB/s per GPU, PCIe gen4, 8x 200 Gb/s HDR", dgx_a100(1));
  add(r, "DGX H100: 8x H100-SXM-80GB, NVSwitch 450 GB/s per GPU, PCIe gen5, 8x 400 Gb/s NDR", dgx_h100(1));
  add(r, "4x A100-SXM4-40GB fully connected by NVLink3, 100 GB/s per pair (MoE-GPS NVLink setup)",
      hgx_a100_4gpu_nvlink());
  add(r, "4x A100-SXM4-40GB on one PCIe 4.0 switch, no NVLink (MoE-GPS PCIe setup)", a100_4gpu_pcie());
  add(r, "8x RTX 3090 on PCIe 4.0, 2 switches x 4 GPUs, 2 sockets, 25 GbE",
      pcie_8x("pcie-8x-rtx3090", "RTX-3090"));
  add(r, "8x RTX 4090 on PCIe 4.0, 2 switches x 4 GPUs, 2 sockets, 25 GbE",
      pcie_8x("pcie-8x-rtx4090", "RTX-4090"));
  add(r, "GRACE-MoE's 8x RTX 3090 server: PCIe at 4 GB/s per direction as its §5.1 states", grace_rtx3090());
  add(r, "GRACE-MoE's 2 nodes x 2 RTX 4090 (48 GB), PCIe 4.0 at 63 GB/s per direction as stated, 25 GbE",
      grace_rtx4090("grace-rtx4090-2x2", 2));
  add(r, "GRACE-MoE's 2 nodes x 4 RTX 4090 (48 GB), PCIe 4.0 at 63 GB/s per direction as stated, 25 GbE",
      grace_rtx4090("grace-rtx4090-2x4", 4));
  add(r, "2 DGX A100 nodes (16x A100-SXM4-80GB) joined by 8x 200 Gb/s HDR InfiniBand per node", dgx_a100(2));
  add(r, "2 DGX H100 nodes (16x H100-SXM-80GB) joined by 8x 400 Gb/s NDR InfiniBand per node", dgx_h100(2));
  add(r, "DGX H200: 8x H200-141GB, NVSwitch 450 GB/s per GPU per direction, PCIe gen5, 8x 400 Gb/s NDR", dgx_h200());
  add(r, "H800 server (DeepSeek's): 8x H800-SXM-80GB, NVLink 200 GB/s per GPU per direction, 8x 400 Gb/s IB",
      dgx_h800());
  add(r, "HGX H20: 8x H20-96GB, NVSwitch 450 GB/s per GPU per direction, PCIe gen5, 8x 400 Gb/s", hgx_h20());
  add(r, "DGX B200: 8x B200-180GB, NVLink 5 900 GB/s per GPU per direction, PCIe gen5, 8x 400 Gb/s NDR",
      dgx_b200());
  add(r, "GB200 NVL72 rack: 72x B200 (GB200-186GB) in one NVLink domain, 900 GB/s per GPU per direction, "
         "Grace over NVLink-C2C, 1x 400 Gb/s NIC per GPU",
      nvl72("gb200-nvl72", "GB200-186GB", 400.0));
  add(r, "GB300 NVL72 rack: 72x B300 (GB300-288GB) in one NVLink domain, 900 GB/s per GPU per direction, "
         "Grace over NVLink-C2C, 1x 800 Gb/s ConnectX-8 per GPU",
      nvl72("gb300-nvl72", "GB300-288GB", 800.0));
}

}  // namespace

Registry<ClusterSpec>& cluster_presets() {
  // Built on first use (like gpu_presets()), so any static initialiser may look presets up.
  static Registry<ClusterSpec> registry = [] {
    Registry<ClusterSpec> r("hardware preset");
    register_presets(r);
    return r;
  }();
  return registry;
}

}  // namespace moesim
