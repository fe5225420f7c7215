#pragma once
// DeepEP's expert-parallel dispatch and combine kernels (deepseek-ai/DeepEP V1, commit 567632d,
// the last V1 commit before EPv2) priced on a moesim Cluster, in closed form.
//
// Two kernel families, as DeepEP ships them:
//  - "normal" (csrc/kernels/intranode.cu, internode.cu): a token goes once to every destination
//    GPU that hosts one of its experts (intranode), or, across nodes, once per destination node
//    over RDMA to the GPU with the same local rank there, which forwards it over NVLink to the
//    node's GPUs that need it (internode.cu, WarpRole kRDMAAndNVLForwarder). Combine runs the
//    path backwards: partial sums gather on the forwarder over NVLink, one BF16 vector per
//    (token, node) crosses RDMA. The kernels run on an SM budget (Buffer.num_sms, default 20).
//  - "low-latency" (internode_ll.cu): one message per (token, top-k selection), no deduplication,
//    sent straight to the expert's GPU over RDMA, or over NVLink to GPUs of the same node when
//    NVSHMEM P2P is allowed (Buffer(allow_nvlink_for_low_latency_mode=True), the default at
//    567632d since PR #173; False restores the all-RDMA kernel of DeepEP's first release).
//
// Time is `fixed + max(RDMA bytes / RDMA rate, NVLink bytes / NVLink rate, counted bytes / SM
// rate)` per GPU, the kernels' stages being pipelined in chunks. Rates (deepep.cpp cites each):
// NVLink at NCCL's 20 GB/s per 25 GB/s link (DeepEP's README: "~160 GB/s" on H800), a NIC at
// NCCL's SM90 inter-node speed step (48 of 50 GB/s for 400 Gb/s; DeepEP: "~50 GB/s"), and the
// normal kernels' per-SM copy rate from DeepEP's own B200 runs at 16 SMs.
#include <span>
#include <string>
#include <vector>

#include "hardware/cluster.hpp"
#include "sim/tick.hpp"

namespace moesim {

enum class DeepEpKernel { kNormal, kLowLatency };
enum class DeepEpOp { kDispatch, kCombine };
const char* deepep_kernel_name(DeepEpKernel k);  ///< "deepep-normal", "deepep-ll"

/// One dispatch or combine call as DeepEP's tests set it up.
struct DeepEpParams {
  DeepEpKernel kernel = DeepEpKernel::kNormal;
  DeepEpOp op = DeepEpOp::kDispatch;
  long long tokens = 4096;  ///< tokens per rank
  int hidden = 7168;
  int top_k = 8;
  int experts = 256;
  int ep = 8;               ///< ranks, GPUs 0..ep-1 of the cluster
  bool fp8 = true;          ///< dispatch in FP8 e4m3 with a float scale per 128 channels (combine is always BF16)
  /// Node-limited routing (DeepSeek-V3's "top-k groups"; DeepEP's tests use min(nodes, 4)): a token
  /// picks this many nodes, then its top-k experts uniformly among theirs. 0: no limit.
  int topk_groups = 0;
  int sms = 20;             ///< normal kernels' SM budget (Buffer.num_sms); the LL kernels have none
  bool ll_nvlink = true;    ///< low-latency: same-node peers over NVLink (PR #173, default at 567632d)
};

/// Expected destinations of one token under uniform top-k routing (with the node limit): the
/// closed forms DeepEP's own V2 analysis uses, E[groups hit] = G·(1 − C(E − E/G, k)/C(E, k)).
struct DeepEpRouting {
  int nodes = 1;               ///< nodes the EP group spans
  double ranks_per_token = 0;  ///< E[distinct destination GPUs], own GPU included
  double nodes_per_token = 0;  ///< E[distinct destination nodes], own node included
  double p_rank = 0;           ///< P(a given GPU is a destination)
  double p_node = 0;           ///< P(a given node is a destination)
};
DeepEpRouting deepep_routing(const Cluster& c, const DeepEpParams& p);

/// Bytes of one token in flight, per DeepEP's source (deepep.cpp cites the lines).
struct DeepEpMessageBytes {
  double record = 0;   ///< bytes moved per copy (normal: buffer record with metadata; LL: message)
  double counted = 0;  ///< bytes per copy as DeepEP's tests count them for the tables
};
DeepEpMessageBytes deepep_message_bytes(const DeepEpParams& p);

/// One call's cost, per GPU (every GPU alike under uniform routing).
struct DeepEpCost {
  double time_us = 0;
  double fixed_us = 0;           ///< the latency floor: one traversal of the farthest peer path
  double nvlink_bytes = 0;       ///< sent over NVLink (wire bytes, records with metadata)
  double rdma_bytes = 0;         ///< sent through the NIC
  double counted_bytes = 0;      ///< as DeepEP's test scripts count them
  double bandwidth_GBps = 0;     ///< counted_bytes / time: the number in DeepEP's tables
  std::string bandwidth_label;   ///< "NVLink" or "RDMA", as DeepEP's tables label the column
  std::string bottleneck;        ///< "nvlink", "rdma" or "sm"
  double nvlink_GBps = 0, rdma_GBps = 0, sm_GBps = 0;  ///< the achievable rates used
  bool fitted = false;  ///< priced by the calibration's DeepEP fit (deepep_kernel_fit.hpp)
  DeepEpRouting routing;
};

/// Prices one call. Throws InputError for what DeepEP cannot run: EP beyond the cluster, experts
/// not divisible by EP, ranks on several nodes without RDMA NICs, internode normal kernels on
/// nodes of other than 8 GPUs (NUM_MAX_NVL_PEERS), hidden not a multiple of 128 with FP8.
DeepEpCost deepep_cost(const Cluster& c, const DeepEpParams& p);

/// Per-GPU traffic of one call for a concrete routing, for expert-parallel dispatch to call: the
/// bytes each GPU sends and receives on each link class in each stage of the kernel's path.
/// Stage 0 of normal internode dispatch is RDMA to the same-local-rank GPU, stage 1 the NVLink
/// forward; combine runs them in the reverse order. The low-latency kernels have one stage.
struct DeepEpGpuTraffic {
  double nvlink_send = 0, nvlink_recv = 0;  ///< NVLink bytes (all stages)
  double rdma_send = 0, rdma_recv = 0;      ///< NIC bytes (all stages)
  double finish_us = 0;                     ///< when this GPU's call returns (deepep_finish below)
  /// finish_us as simulated time.
  Tick finish() const { return us_to_ticks(finish_us); }
};

/// `dests[t]` are the GPUs (indices into 0..p.ep-1) of token t's top-k selections, repeats allowed
/// (two experts on one GPU); `home[t]` is the GPU that owns token t. p.tokens, top_k, experts and the
/// routing fields are ignored: the routing is given. Each GPU's finish time is the latency floor plus
/// the longest drain among its own links and those of every GPU that sends to it (a receiver waits
/// for its slowest sender), at the rates of deepep_cost.
std::vector<DeepEpGpuTraffic> deepep_traffic(const Cluster& c, const DeepEpParams& p, std::span<const int> home,
                                             std::span<const std::vector<int>> dests);

}  // namespace moesim
