#pragma once
// NCCL's tuning model (NVIDIA/nccl v2.19.3-1, src/graph/tuning.cc ncclTopoTuneModel and
// ncclTopoGetAlgoTime; src/enqueue.cc topoGetAlgoInfo): for a collective of a given size NCCL
// prices every enabled (algorithm, protocol) pair as `latency + bytes / algorithm bandwidth` and
// runs the cheapest. moesim asks the same question of the same formula, with the topology NCCL's
// search (src/graph/search.cc, topo.h, topo.cc) would find on the cluster: channels and per-channel
// bandwidth at NCCL's link rates, not the nominal ones. collectives.cpp then places the choice's
// traffic on the flow network so that concurrent traffic still contends; on an idle cluster the
// simulated time equals this model's.
//
// v2.19.3 is the NCCL that PyTorch 2.2 ships; it is the version the A100 measurements in
// ../shared/data were most likely taken with. Every constant is quoted from that tag where it is set.
#include <string>
#include <vector>

#include "hardware/cluster.hpp"

namespace moesim {

enum class CollectiveKind;

enum class NcclAlgo { kRing, kTree, kNvls };
enum class NcclProto { kLL, kLL128, kSimple };
inline constexpr int kNcclAlgos = 3;
inline constexpr int kNcclProtos = 3;
const char* nccl_algo_name(NcclAlgo a);
const char* nccl_proto_name(NcclProto p);

/// What NCCL's topology search would find for one communicator (a set of GPUs).

struct NcclTopology {
  int arch_index = 1;         ///< tuning tables' row: 0 Volta, 1 Ampere, 2 Hopper (compCapIndex)
  int compute_capability = 80;
  bool amd_cpu = false;
  int nodes = 1, ranks = 1, ppn = 1;
  bool nvlink_intra = false;  ///< typeIntra <= PATH_NVB: members of a node reach each other over NVLink
  bool intra_hw_nvlink = false;  ///< NVLink latencies inside nodes (typeIntra == LINK_NVL; not with 1 GPU per node)
  bool nic_near_gpu = true;   ///< typeInter <= PATH_PXB: each GPU's rail NIC shares its PCIe switch
  bool nvswitch = false;      ///< an NVSwitch plane joins the node's GPUs (NVLS on Hopper)
  double intra_GBps = 0.0;    ///< per-GPU bandwidth NCCL sees inside a node (sum over its channels)
  int ring_channels = 1;      ///< graph nChannels of the ring (and tree) graph
  double ring_bw_GBps = 0.0;  ///< graph bwIntra: per-channel bandwidth of the ring graph
  double tree_bw_GBps = 0.0;  ///< per-channel bandwidth of the tree graph (pass 2 raises it on 2+ nodes)
  double net_GBps = 0.0;      ///< per-NIC channel speed across nodes (0 on one node)
};

/// Channels of the tree all-reduce's flows: one per ring channel, at most one per GPU of a node
/// (each channel's chains start at a different local GPU).
inline int nccl_tree_channels(const NcclTopology& t) { return t.ring_channels < t.ppn ? t.ring_channels : t.ppn; }

/// NCCL's view of `gpus` on `c`.
NcclTopology nccl_topology(const Cluster& c, const std::vector<int>& gpus);

/// One (algorithm, protocol) as ncclTopoTuneModel prices it.
struct NcclCandidate {
  NcclAlgo algo = NcclAlgo::kRing;
  NcclProto proto = NcclProto::kSimple;
  bool enabled = false;       ///< false: not available for this collective or topology
  std::string why_disabled;
  double latency_us = 0.0;    ///< comm->latencies (with the ring plateau factor where it applies)
  double bus_GBps = 0.0;      ///< bus bandwidth after the protocol's factors and caps
  double alg_GBps = 0.0;      ///< algorithm bandwidth, with the tree correction for this size
  double time_us = 0.0;       ///< latency + bytes / algorithm bandwidth
};

/// The choice for one collective call, and every candidate it was chosen from.
struct NcclChoice {
  NcclTopology topo;
  NcclCandidate best;
  std::vector<NcclCandidate> candidates;
  int steps = 0;  ///< ring steps (2(n-1) all-reduce, n-1 all-gather), 1 for point-to-point
};

/// All-reduce or all-gather of `bytes` (NCCL's nBytes: the per-GPU buffer; all-gather: its output)
/// over `gpus`. Throws std::invalid_argument for other kinds.
NcclChoice nccl_choose(const Cluster& c, CollectiveKind kind, const std::vector<int>& gpus, double bytes);

/// Point-to-point (send/recv; the pairs of an all-to-all) from GPU `src` to `dst`, which NCCL
/// does not price in its tuning model: enqueue.cc sends with LL up to NCCL_P2P_LL_THRESHOLD
/// (16 KB) and Simple above; we charge one ring step of that protocol's latencies and the path's
/// NCCL bandwidth (halved for LL, whose 8-byte lines carry 4 bytes of data and 4 of flag).
NcclCandidate nccl_p2p(const Cluster& c, int src, int dst, double bytes);
/// enqueue.cc NCCL_P2P_LL_THRESHOLD: point-to-point messages up to this many bytes use LL.
inline constexpr double kNcclP2pLLThreshold = 16384.0;

/// NCCL's bandwidth for one link of `c` (GB/s): NVLink at ncclTopoNVLinkBw per 25 GB/s link, PCIe
/// at lanes × 120 / 80 per lane generation (topo.cc), the inter-socket link at NCCL's AMD_BW or
/// SKL_QPI_BW, a NIC at its line rate (speed / 8000).
double nccl_link_GBps(const Cluster& c, LinkId link);
/// The narrowest NCCL link bandwidth on the route between two GPUs (GB/s). (Ring graphs across
/// nodes round it down to a step of NCCL's inter-node search speeds: nccl_topology.)
double nccl_path_GBps(const Cluster& c, int src_gpu, int dst_gpu);

}  // namespace moesim
