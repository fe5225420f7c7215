#pragma once
// Collectives expanded into flows on the plan (DESIGN: "collectives decompose into flows"):
// ring all-reduce and all-gather step by step (tree all-reduce as concurrent chain and tree edges
// when NCCL's tuning picks it), all-to-all(v) as concurrent pairwise flows, send/recv as one flow.
// With collective_model "nccl" (the default) NCCL's tuning model (nccl_tuning.hpp) chooses the
// algorithm and protocol and sets the latency and achievable rate; with "line-rate", or where a
// calibration profile has a measured curve, flows run at line rate after a fixed launch cost.
#include <string>
#include <utility>
#include <vector>

#include "hardware/cluster.hpp"
#include "hardware/ring_channels.hpp"
#include "sim/task_graph.hpp"

namespace moesim {

enum class CollectiveKind { kAllReduce, kAllGather, kAllToAll, kSendRecv };
const char* collective_name(CollectiveKind k);
bool parse_collective(const std::string& s, CollectiveKind& out);
/// The name measurements and profiles use ("all_reduce", "all_gather", "all_to_all", "send_recv").
const char* collective_calibration_name(CollectiveKind k);

/// The profile's name for `engine`'s custom all-reduce curves ("custom_all_reduce.trtllm").
std::string custom_all_reduce_name(const std::string& engine);

/// The calibration of `kind` over `gpus` (intra- or inter-node, that GPU count); null when the
/// cluster is uncalibrated or the profile has no curve for it. An intra-node all-reduce of a
/// cluster with custom_all_reduce reads the engine's custom curve when the profile has one.
const CollectiveCalibration* collective_calibration(const Cluster& c, CollectiveKind kind, const std::vector<int>& gpus);

/// Ring all-reduce of `bytes` per GPU: 2(n-1) steps of bytes/n per GPU. Returns a join.
TaskId add_ring_all_reduce(TaskGraph& g, const Cluster& c, const std::vector<int>& gpus, double bytes,
                           Phase phase, int layer, TaskGraph::Deps deps);
/// Ring all-gather where every GPU contributes `bytes_per_gpu`: n-1 steps. Returns a join.
TaskId add_ring_all_gather(TaskGraph& g, const Cluster& c, const std::vector<int>& gpus,
                           double bytes_per_gpu, Phase phase, int layer, TaskGraph::Deps deps);

/// m's transpose (m square), built in 16 x 16 tiles so that the rows read and the rows written
/// both stay in cache (a column at a time missed on every element at 1,024 GPUs).
std::vector<std::vector<double>> transpose_of(const std::vector<std::vector<double>>& m);

/// All-to-all(v): `bytes[i][j]` from gpus[i] to gpus[j], all flows concurrent once `start[i]`
/// (per source) and that GPU's collective launch cost are done. Returns, per GPU, a join of every flow it sends or receives: the point
/// where that GPU's collective call returns. `transposed`: `bytes` is the transpose, bytes[j][i]
/// from gpus[i] to gpus[j] (a gather that reverses a scatter's matrix); the same all-to-all, without
/// a transposed copy where the closed-form all-to-all model reads it as it is.
std::vector<TaskId> add_all_to_all(TaskGraph& g, const Cluster& c, const std::vector<int>& gpus,
                                   const std::vector<std::vector<double>>& bytes, Phase phase,
                                   int layer, const std::vector<TaskId>& start, bool transposed = false);

/// The (child, parent) edges of channel `channel` of NCCL's tree all-reduce over `gpus` (init.cc,
/// trees.cc): inside each node a chain, across nodes a binary tree of the chains' heads; channel k
/// starts its chains at local GPU k, so the channels' heads, and their rail NICs, differ. Every
/// edge carries the buffer up (reduce) and down (broadcast), pipelined: all edges run at once.
std::vector<std::pair<int, int>> tree_edges(const Cluster& c, const std::vector<int>& gpus, int channel);

/// One point-to-point message (send/recv, an all-to-all pair, AMoE's token messages) as the
/// cluster's collective_model prices it: the delay before its flow starts and the factor on the
/// bytes its flow carries at line rate. "nccl": NCCL's p2p protocol latency and link rate
/// (nccl_p2p) folded in; "line-rate": collective_launch_us and the bytes themselves.
struct P2pPricing {
  Tick launch = 0;
  double wire_scale = 1.0;
  HopLatency hop = HopLatency::kPaid;  ///< kInLaunch: `launch` already includes the route's hops
};
P2pPricing price_p2p(const Cluster& c, int src_gpu, int dst_gpu, double bytes);

/// Time for one collective on an otherwise idle cluster: `bytes` is the per-GPU buffer
/// (all-reduce, all-to-all total per GPU, send/recv message; all-gather output size).
/// Uses GPUs 0..gpus-1 (send/recv: GPU 0 → GPU gpus-1).
Tick collective_time(const Cluster& c, CollectiveKind kind, int gpus, double bytes);

}  // namespace moesim
