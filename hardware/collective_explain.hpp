#pragma once
// Why a collective costs what it does (`moesim cost ... --explain`): under collective_model "nccl",
// the algorithm and protocol NCCL's tuning model picks (with every candidate it priced), its
// channels, latency and bandwidths; under "line-rate" or a calibration, the ring the flows follow
// and the efficiency applied. Either way the link that bounds the flows and a closed-form estimate
// beside the simulated time; a gap between the two is contention or pipelining the flow model
// resolves and the formula does not.
#include <string>
#include <vector>

#include "hardware/cluster.hpp"
#include "hardware/collectives.hpp"
#include "hardware/nccl_tuning.hpp"

namespace moesim {

/// The pieces of one collective on an idle cluster (GPUs 0..gpus-1; send/recv: 0 → gpus-1).
struct CollectiveExplanation {
  std::string model;      ///< "nccl", "line-rate" or "calibrated": what priced it
  std::string algorithm;  ///< "ring", "tree", "nvls", "pairwise" (all-to-all), "point-to-point" (send/recv)
  /// The protocol: NCCL's LL, LL128 or Simple (nccl), one protocol at line rate, or a measured curve.
  std::string protocol;
  /// nccl: NCCL's view of the communicator and every (algorithm, protocol) it priced; the choice
  /// is the enabled candidate with the smallest time. Empty otherwise (and for point-to-point,
  /// which NCCL does not tune: it holds the one protocol used).
  NcclTopology topology;
  std::vector<NcclCandidate> candidates;
  double bus_GBps = 0.0;             ///< nccl: bus bandwidth of the choice
  double alg_GBps = 0.0;             ///< nccl: algorithm bandwidth of the choice at this size
  int steps = 1;                     ///< sequential steps (ring: 2(n-1) all-reduce, n-1 all-gather)
  double step_bytes = 0.0;           ///< bytes each GPU sends per step, before the efficiency
  std::vector<RingChannel> channels;  ///< ring channels (empty for the other algorithms)
  double launch_us = 0.0;            ///< before the flows: NCCL's latency, collective_launch_us or calibrated
  bool calibrated = false;
  double efficiency = 1.0;           ///< fraction of line rate the flows achieve (protocol and link rates)
  double hop_latency_us = 0.0;       ///< the largest route latency a step's flows pay (0: in the launch)
  std::string bottleneck_link;       ///< the link with the most bytes per bandwidth in a step
  std::string bottleneck_class;      ///< "nvlink", "pcie", "socket", "network"
  double bottleneck_Bps = 0.0;       ///< its bandwidth
  double bottleneck_bytes = 0.0;     ///< wire bytes it carries per step (all channels)
  double estimate_us = 0.0;          ///< launch + steps × (hop latency + bottleneck bytes / bandwidth); nccl: its time
  double simulated_us = 0.0;         ///< collective_time: what the simulator says
};

/// Explains `kind` of `bytes` per GPU (as collective_time takes it) over `gpus` GPUs of `c`.
CollectiveExplanation explain_collective(const Cluster& c, CollectiveKind kind, int gpus, double bytes);

}  // namespace moesim
