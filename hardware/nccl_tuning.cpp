#include "hardware/nccl_tuning.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include "hardware/collectives.hpp"

namespace moesim {
namespace {

constexpr int kTree = 0, kRing = 1, kNvls = 2;  // NCCL's algorithm order (Tree first) decides ties
constexpr int kLL = 0, kLL128 = 1, kSimple = 2;
constexpr int kHwNvlink = 0, kHwPci = 1, kHwNet = 2;

// tuning.cc, baseLat[algo][proto] (µs): Tree, Ring; NVLS has no base latency in 2.19.
constexpr double kBaseLat[3][3] = {{6.8, 14.0, 0.0}, {6.6, 14.0, 8.4}, {0.0, 0.0, 0.0}};
// tuning.cc, hwLat[hw][algo][proto] (µs) for NVLink, PCI and the network.
constexpr double kHwLat[3][3][3] = {
    {{0.6, 1.25, 28.0}, {0.6, 1.9, 3.4}, {0.0, 0.0, 23.0}},
    {{1.0, 1.9, 28.0}, {1.0, 2.5, 5.7}, {0.0, 0.0, 0.0}},
    {{5.0, 8.5, 28.0}, {2.7, 4.0, 14.0}, {0.0, 0.0, 18.0}},
};
// tuning.cc, [compCapIndex or CPU row][N1 / N2 / N4+] (GB/s). Rows 0-2 (Volta, Ampere, Hopper)
// are NCCL 2.19.3's. NCCL 2.19 knows no Blackwell: row 3 (compute capability >= 10.0, B200,
// GB200, B300) is NCCL 2.30.7's Blackwell row (tuning.cc @ v2.30.7-1), the only release line
// that has one; its llMaxBws is twice Hopper's 2.30 value (2 x {141, 45, 35}).
constexpr double kLlMaxBw[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {87.7, 22.5, 19.0}, {282.0, 90.0, 70.0}};
constexpr double kPerChMaxRingLL128Bw[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {40.0, 40.0, 40.0}};
constexpr double kPerChMaxTreeLL128Bw[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kPerChMaxTreeBw[4][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
// tuning.cc, treeCorrectionFactor[proto][log2(nBytes >> 6)]: "Trees are not perfectly sticking to
// the model for medium sizes" (powers of two, 64 B to 256 MB).
constexpr double kTreeCorrection[3][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};
// search.cc: the per-channel speeds the ring search tries, fastest first (sm90 has its own).
const std::vector<double> kSpeedIntra{40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
const std::vector<double> kSpeedInter{48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12};
const std::vector<double> kSm90SpeedIntra{60, 50, 40, 30, 24, 20, 15, 12, 6, 3};
const std::vector<double> kSm90SpeedInter{48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
// search.cc @ v2.30.7-1: Blackwell's (sm100) steps.
const std::vector<double> kSm100SpeedIntra{90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18};
const std::vector<double> kSm100SpeedInter{96, 86, 80, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
const std::vector<double>& speeds_intra(int cc) { return cc >= 100 ? kSm100SpeedIntra : cc >= 90 ? kSm90SpeedIntra : kSpeedIntra; }
const std::vector<double>& speeds_inter(int cc) { return cc >= 100 ? kSm100SpeedInter : cc >= 90 ? kSm90SpeedInter : kSpeedInter; }
constexpr int kMaxChannels = 32;      // device.h MAXCHANNELS (the communicator, after ncclTopoPostset)
constexpr int kMaxRingSearch = 16;    // init.cc: ring graph maxChannels = MAXCHANNELS / 2

// topo.h ncclTopoNVLinkBw: GB/s per NVLink link in NCCL's topology, against 25 GB/s line rate
// per NVLink2/3/4 link: the ~20% protocol overhead NVIDIA quotes ("450GB/s is the line rate.
// With the protocol overhead (~20%) NCCL can get ... 370GB/s", NVIDIA/nccl-tests#212).
double nvlink_link_GBps(int cc) {
  if (cc >= 100) return 40.1;  // SM100_NVLINK_BW (topo.h @ v2.30.7-1), against NVLink 5's 50 GB/s
  if (cc >= 90) return 20.0;  // SM90_NVLINK_BW
  if (cc == 86) return 12.0;  // SM86_NVLINK_BW
  if (cc >= 80) return 20.0;  // SM80_NVLINK_BW
  if (cc >= 70) return 20.0;  // SM70_NVLINK_BW
  if (cc >= 60) return 18.0;  // SM60_NVLINK_BW
  return 20.0;                // older: ncclTopoNVLinkBw's fallback, SM80_NVLINK_BW
}
/// Line rate per NVLink link per direction: 25 GB/s for NVLink 2-4, 50 GB/s for NVLink 5
/// (Blackwell: 1.8 TB/s bidirectional over 18 links).
double nvlink_line_GBps(int cc) { return cc >= 100 ? 50.0 : 25.0; }
// topo.cc: PCIe = lanes × speed / 80 with speed 120 per lane at 16 GT/s → 24 GB/s for gen4 x16,
// which our presets rate at 31.5 GB/s after 128b/130b: NCCL counts 24/31.5 of every generation.
constexpr double kPcieNcclFraction = 24.0 / 31.5;

double speed_floor(const std::vector<double>& speeds, double bw) {
  for (double s : speeds)
    if (s <= bw * (1.0 + 1e-9)) return s;
  return bw;  // slower than NCCL's slowest step: the link itself
}

int log2i(double n) {
  if (!(n >= 1.0)) return 0;  // NCCL's log2i(0) (bytes below 64), and no shifting of negatives
  long v = static_cast<long>(std::min(n, 9e18));
  int l = 0;
  while (v >>= 1) ++l;
  return l;
}

// Routes are composed into one buffer per thread: point-to-point pricing runs for every pair of
// every all-to-all, and must not allocate.
const std::vector<LinkId>& route_of(const Cluster& c, int a, int b) {
  thread_local std::vector<LinkId> path;
  c.route_into(c.gpu_endpoint(a), c.gpu_endpoint(b), path);
  return path;
}

bool is_nvlink_only(const Cluster& c, int a, int b) {
  for (LinkId l : route_of(c, a, b))
    if (c.links()[l].cls != LinkClass::kNvLink) return false;
  return true;
}

}  // namespace

const char* nccl_algo_name(NcclAlgo a) {
  switch (a) {
    case NcclAlgo::kRing: return "ring";
    case NcclAlgo::kTree: return "tree";
    case NcclAlgo::kNvls: return "nvls";
  }
  return "?";
}

const char* nccl_proto_name(NcclProto p) {
  switch (p) {
    case NcclProto::kLL: return "LL";
    case NcclProto::kLL128: return "LL128";
    case NcclProto::kSimple: return "Simple";
  }
  return "?";
}

double nccl_link_GBps(const Cluster& c, LinkId link) {
  const auto& info = c.links()[link];
  const double line = info.bandwidth_Bps / 1e9;
  switch (info.cls) {
    case LinkClass::kNvLink: return line * nvlink_link_GBps(c.spec().gpu.compute_capability) /
                                     nvlink_line_GBps(c.spec().gpu.compute_capability);
    case LinkClass::kPcie: return line * kPcieNcclFraction;
    // topo.cc: the CPU interconnect at AMD_BW (16) or SKL_QPI_BW (10) GB/s, whatever its lanes.
    case LinkClass::kSocket: return std::min(line, c.spec().cpu_vendor == "amd" ? 16.0 : 10.0);
    case LinkClass::kNetwork: return line;  // topo.cc: NIC speed (Mb/s) / 8000
  }
  return line;
}

double nccl_path_GBps(const Cluster& c, int src_gpu, int dst_gpu) {
  double bw = std::numeric_limits<double>::infinity();
  for (LinkId l : route_of(c, src_gpu, dst_gpu)) bw = std::min(bw, nccl_link_GBps(c, l));
  return bw;
}

NcclTopology nccl_topology(const Cluster& c, const std::vector<int>& gpus) {
  NcclTopology t;
  const int cc = c.spec().gpu.compute_capability;
  t.compute_capability = cc;
  t.arch_index = cc >= 100 ? 3 : cc >= 90 ? 2 : cc >= 80 ? 1 : 0;
  t.amd_cpu = c.spec().cpu_vendor == "amd";
  t.nvswitch = c.spec().fabric == Fabric::kNvSwitch;
  t.ranks = static_cast<int>(gpus.size());
  std::set<int> nodes;
  for (int g : gpus) nodes.insert(c.node_of_gpu(g));
  t.nodes = std::max<int>(1, static_cast<int>(nodes.size()));
  t.ppn = std::max(1, t.ranks / t.nodes);
  // Members per node. NCCL's ranks agree on the weakest node's graph (init.cc takes the minimum
  // channel count and speed over ranks), so every node counts and the slowest sets the values.
  std::map<int, std::vector<int>> by_node;
  for (int g : gpus) by_node[c.node_of_gpu(g)].push_back(g);
  int fewest = t.ranks;
  for (const auto& [node, members] : by_node) fewest = std::min(fewest, static_cast<int>(members.size()));
  // One GPU per node: NCCL's intra path is PATH_LOC, not NVLink, so PCI latencies apply (below);
  // LL128 stays on (PATH_LOC <= PATH_NVB).
  t.intra_hw_nvlink = fewest > 1;

  // Intra-node: NVLink if every pair of a node's members talks over NVLink only (NVB relays
  // included, typeIntra <= PATH_NVB); then a GPU's bandwidth is its NVLinks towards the others.
  t.nvlink_intra = c.spec().fabric != Fabric::kPcie;
  for (const auto& [node, local] : by_node)
    for (std::size_t i = 0; i < local.size() && t.nvlink_intra; ++i)
      for (std::size_t j = 0; j < local.size() && t.nvlink_intra; ++j)
        if (i != j && !is_nvlink_only(c, local[i], local[j])) t.nvlink_intra = false;
  t.intra_hw_nvlink = t.intra_hw_nvlink && t.nvlink_intra;
  t.intra_GBps = std::numeric_limits<double>::infinity();
  double pair_GBps = std::numeric_limits<double>::infinity();
  for (const auto& [node, local] : by_node) {
    if (local.size() < 2) continue;
    const auto ring = ring_order(c, local);
    for (std::size_t i = 0; i < ring.size(); ++i) {
      const int a = ring[i];
      if (t.nvlink_intra) {
        std::set<LinkId> out;  // the GPU's first hops towards the others: its NVLinks in use
        for (int b : local)
          if (b != a) out.insert(c.route(c.gpu_endpoint(a), c.gpu_endpoint(b)).front());
        double sum = 0.0;
        for (LinkId l : out) sum += nccl_link_GBps(c, l);
        t.intra_GBps = std::min(t.intra_GBps, sum);
      }
      const double hop = nccl_path_GBps(c, a, ring[(i + 1) % ring.size()]);
      pair_GBps = std::min(pair_GBps, hop);
      if (!t.nvlink_intra) t.intra_GBps = std::min(t.intra_GBps, hop);
    }
  }

  if (t.nodes == 1) {
    // search.cc: the fastest speed at which rings are found, then as many rings as the GPUs'
    // bandwidth allows; ncclTopoDupChannels doubles them (halving their speed) from 25 GB/s, up to
    // the ring graph's maxChannels (16, init.cc). Below NCCL's slowest speed step (3 GB/s) NCCL
    // would fall back to 0.1 GB/s; we keep the link's own rate.
    const auto& speeds = speeds_intra(cc);
    if (!std::isfinite(t.intra_GBps)) t.intra_GBps = 0.0;
    double speed = speed_floor(speeds, std::min(t.intra_GBps, pair_GBps));
    int nch = speed > 0 ? std::clamp(static_cast<int>(std::floor(t.intra_GBps / speed + 1e-9)), 1, kMaxRingSearch) : 1;
    const bool dup = speed >= 25.0 && !(cc > 80 && speed < 50.0 && nch > 4);
    if (dup) {
      const int doubled = std::min(2 * nch, kMaxRingSearch);
      speed /= static_cast<double>((doubled + nch - 1) / nch);
      nch = doubled;
    }
    t.ring_channels = nch;
    t.ring_bw_GBps = t.tree_bw_GBps = speed;
    return t;
  }

  // Across nodes: one ring channel per rail NIC the node's members use, at the NIC path's speed
  // step (NIC line rate, capped by its PCIe path: 24 GB/s for HDR behind gen4; "We usually consider
  // 24GB/s is the peak performance per 200G NIC", NVIDIA/nccl-tests#119).
  t.net_GBps = std::numeric_limits<double>::infinity();
  int nic_channels = std::numeric_limits<int>::max();
  for (const auto& [node, local] : by_node) {
    int other = -1;  // any member on another node: the route's head is the GPU's rail NIC
    for (int g : gpus)
      if (c.node_of_gpu(g) != node) {
        other = g;
        break;
      }
    std::set<LinkId> nics;
    for (int g : local) {
      const auto r = c.route(c.gpu_endpoint(g), c.gpu_endpoint(other));
      for (LinkId l : r) {
        if (c.links()[l].cls == LinkClass::kNetwork) {
          nics.insert(l);
          break;
        }
        // typeInter <= PATH_PXB: the GPU reaches its NIC through PCIe switches, not a CPU.
        if (c.links()[l].name.find(".cpu") != std::string::npos) t.nic_near_gpu = false;
      }
      t.net_GBps =
          std::min(t.net_GBps, speed_floor(speeds_inter(cc), nccl_path_GBps(c, g, other)));
    }
    nic_channels = std::min(nic_channels, std::max<int>(1, static_cast<int>(nics.size())));
  }
  t.ring_channels = nic_channels;
  t.ring_bw_GBps = t.net_GBps;
  // Tree pass 2 (search.cc) raises the intra-node speed up to twice the inter-node one, as long as
  // the node's links carry it.
  const double intra_per_channel = fewest > 1 ? t.intra_GBps / t.ring_channels : 2.0 * t.net_GBps;
  t.tree_bw_GBps = std::max(t.net_GBps, speed_floor(speeds_inter(cc),
                                                    std::min(2.0 * t.net_GBps, intra_per_channel)));
  if (!std::isfinite(t.intra_GBps)) t.intra_GBps = 0.0;
  return t;
}

NcclChoice nccl_choose(const Cluster& c, CollectiveKind kind, const std::vector<int>& gpus, double bytes) {
  if (kind != CollectiveKind::kAllReduce && kind != CollectiveKind::kAllGather)
    throw std::invalid_argument("nccl_choose prices all-reduce and all-gather; point-to-point uses nccl_p2p");
  if (!std::isfinite(bytes) || bytes < 0.0) throw std::invalid_argument("nccl_choose: bytes must be finite and >= 0");
  NcclChoice out;
  const NcclTopology t = out.topo = nccl_topology(c, gpus);
  const bool all_reduce = kind == CollectiveKind::kAllReduce;
  const int n = t.ranks, nodes = t.nodes;
  const int nsteps = all_reduce ? 2 * (n - 1) : n - 1;
  const int inter_steps = all_reduce ? (nodes > 1 ? 2 * nodes : 0) : nodes - 1;
  out.steps = nsteps;
  const int index2 = nodes <= 2 ? nodes - 1 : 2;
  // "LL: for single node, we look at GPU type; for multi-node, we look at CPU type".
  const int index1 = nodes == 1 ? t.arch_index : (t.amd_cpu ? 1 : 0);
  const double ll_max = kLlMaxBw[index1][index2];
  const double ppn = static_cast<double>(n) / nodes;
  const int intra_hw = t.intra_hw_nvlink ? kHwNvlink : kHwPci;
  const int cc = t.compute_capability;
  // LL128 "by default only on Volta/Ampere/Hopper+NVLink" (typeIntra <= NVB, typeInter <= PXB).
  const bool ll128 = t.nvlink_intra && t.nic_near_gpu && (cc == 70 || cc == 80 || cc == 90 || cc >= 100);
  // NVLS: NVSwitch multicast on Hopper, one node (2.19 disables it across nodes without CollNet).
  // ncclNvlsInit turns NVLS off with 2 or fewer local GPUs.
  const bool nvls = all_reduce && nodes == 1 && t.nvswitch && cc >= 90 && n > 2;
  // getNetOverhead: 2 µs per step on AMD hosts, 1 on Intel, three times that for Simple.
  const double net_overhead = t.amd_cpu ? 2.0 : 1.0;
  const int comm_channels = std::min(kMaxChannels, 2 * t.ring_channels);  // ncclTopoPostset doubles rings

  for (int a : {kTree, kRing, kNvls}) {
    for (int p : {kLL, kLL128, kSimple}) {
      NcclCandidate k;
      k.algo = a == kTree ? NcclAlgo::kTree : a == kRing ? NcclAlgo::kRing : NcclAlgo::kNvls;
      k.proto = p == kLL ? NcclProto::kLL : p == kLL128 ? NcclProto::kLL128 : NcclProto::kSimple;
      k.enabled = true;
      if (n < 2) k.enabled = false, k.why_disabled = "one GPU";
      else if (a == kTree && !all_reduce) k.enabled = false, k.why_disabled = "tree runs all-reduce only";
      else if (a == kNvls && !nvls) k.enabled = false, k.why_disabled = "NVLS needs Hopper NVSwitch, one node, all-reduce";
      else if (a == kNvls && p != kSimple) k.enabled = false, k.why_disabled = "NVLS runs Simple only";
      else if (p == kLL128 && !ll128) k.enabled = false, k.why_disabled = "LL128 off (needs NVLink inside, NIC near GPU, sm70/80/90)";
      const int nch = t.ring_channels;
      // NVLS (search.cc): one channel per local GPU, each GPU heading one and joining all, so a
      // GPU's NVLink carries ppn + 1 channels: ppn x intra / (ppn + 1) in all.
      const double bw = a == kTree ? (nodes <= 2 ? t.tree_bw_GBps : t.net_GBps)
                        : a == kNvls ? t.intra_GBps / (n + 1)
                                     : t.ring_bw_GBps;
      double bus = (a == kNvls ? n : nch) * bw;
      if (a == kRing && p == kLL) bus = std::min(ll_max, bus * (nodes > 1 || all_reduce ? 1.0 / 4.0 : 1.0 / 3.0));
      if (a == kRing && p == kLL128) bus = std::min(bus * (ppn < 2 ? 0.7 : 0.92), nch * kPerChMaxRingLL128Bw[t.arch_index][index2]);
      if (a == kTree) bus = std::min(bus * .92, nch * kPerChMaxTreeBw[t.arch_index][index2]);
      if (a == kTree && p == kLL) bus = std::min(bus / 3.8, ll_max);
      if (a == kTree && p == kLL128)
        bus = std::min(bus * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), nch * kPerChMaxTreeLL128Bw[t.arch_index][index2]);
      // One GPU per node leaves the tree graph an unbalanced NCCL_TOPO_PATTERN_TREE: x 0.85.
      if (a == kTree && t.ppn == 1 && nodes > 1) bus *= .85;
      k.bus_GBps = bus;
      const double ratio = a == kRing ? static_cast<double>(n) / std::max(1, nsteps) : a == kNvls ? 5.0 / 6.0 : 0.5;
      double alg = bus * ratio;

      const double intra_lat = kHwLat[intra_hw][a][p];
      const double inter_lat = kHwLat[kHwNet][a][p];  // + graph latencyInter, 0 for IB and sockets
      double lat = kBaseLat[a][p];
      if (a == kRing) {
        const double overhead = nodes > 1 ? net_overhead * (p == kSimple ? 3.0 : 1.0) : 0.0;
        lat += (nsteps - inter_steps) * std::max(intra_lat, overhead) + inter_steps * inter_lat;
      } else if (a == kTree) {
        lat += 2.0 * ((n / nodes - 1) * intra_lat + log2i(nodes) * inter_lat);
      } else {
        lat = intra_lat;
      }
      // ncclTopoGetAlgoTime: tree correction by size; the ring's "plateau effect" across nodes.
      const int log_size = log2i(bytes / 64.0);
      if (a == kTree && log_size < 23) alg *= kTreeCorrection[p][log_size];
      if (a == kRing && p == kSimple && nodes > 1 && all_reduce && bytes / (comm_channels * n) >= 64.0)
        lat *= cc < 80 ? 1.9 : 1.4;
      k.alg_GBps = alg;
      k.latency_us = lat;
      k.time_us = alg > 0 ? lat + bytes / (1000.0 * alg) : std::numeric_limits<double>::infinity();
      if (k.enabled && alg <= 0) k.enabled = false, k.why_disabled = "no bandwidth";
      out.candidates.push_back(k);
    }
  }
  // topoGetAlgoInfo: the enabled candidate with the smallest time (first on ties, Tree before Ring).
  const NcclCandidate* best = nullptr;
  for (const auto& k : out.candidates)
    if (k.enabled && (!best || k.time_us < best->time_us)) best = &k;
  if (best) out.best = *best;
  else out.best = out.candidates[kRing * 3 + kSimple];  // one GPU: nothing moves
  return out;
}

NcclCandidate nccl_p2p(const Cluster& c, int src, int dst, double bytes) {
  NcclCandidate k;
  k.algo = NcclAlgo::kRing;
  const bool inter = c.node_of_gpu(src) != c.node_of_gpu(dst);
  // Network connections have no LL buffers unless NCCL_ALLOC_P2P_NET_LL_BUFFERS=1 (init.cc,
  // net.cc), and enqueue.cc falls back to Simple without them: across nodes every send is Simple.
  const int p = bytes <= kNcclP2pLLThreshold && !inter ? kLL : kSimple;
  k.proto = p == kLL ? NcclProto::kLL : NcclProto::kSimple;
  k.enabled = true;
  const int hw = inter ? kHwNet : is_nvlink_only(c, src, dst) ? kHwNvlink : kHwPci;
  k.latency_us = kBaseLat[kRing][p] + kHwLat[hw][kRing][p];
  double bw = nccl_path_GBps(c, src, dst);
  if (p == kLL) {
    const int cc = c.spec().gpu.compute_capability;
    const int arch = cc >= 100 ? 3 : cc >= 90 ? 2 : cc >= 80 ? 1 : 0;
    const int index1 = inter ? (c.spec().cpu_vendor == "amd" ? 1 : 0) : arch;
    bw = std::min(bw * 0.5, kLlMaxBw[index1][inter ? 1 : 0]);
  }
  k.bus_GBps = k.alg_GBps = bw;
  k.time_us = k.latency_us + bytes / (1000.0 * bw);
  return k;
}

}  // namespace moesim
