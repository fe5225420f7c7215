#pragma once
// Why a collective costs what it does (`moesim cost ... --explain`): the algorithm the flows follow,
// its channels, the link that bounds it, the efficiency applied, and a closed-form estimate beside
// the simulated time. The estimate uses the same routes and rates as the simulation, so a gap
// between the two is contention or pipelining the flow model resolves and the formula does not.
#include <string>
#include <vector>

#include "hardware/cluster.hpp"
#include "hardware/collectives.hpp"

namespace moesim {

/// The pieces of one collective on an idle cluster (GPUs 0..gpus-1; send/recv: 0 → gpus-1).
struct CollectiveExplanation {
  std::string algorithm;  ///< "ring", "pairwise" (all-to-all), "point-to-point" (send/recv)
  /// The protocol as modelled: one transfer protocol at line rate, or a measured efficiency curve.
  /// (moesim does not choose between NCCL's LL, LL128 and Simple.)
  std::string protocol;
  int steps = 1;                     ///< sequential steps (ring: 2(n-1) all-reduce, n-1 all-gather)
  double step_bytes = 0.0;           ///< bytes each GPU sends per step, before the efficiency
  std::vector<RingChannel> channels;  ///< ring channels (empty for the other algorithms)
  double launch_us = 0.0;            ///< fixed software cost (preset or calibrated)
  bool calibrated = false;
  double efficiency = 1.0;           ///< achieved fraction of line rate at this size (1 uncalibrated)
  double hop_latency_us = 0.0;       ///< the largest route latency a step's flows pay
  std::string bottleneck_link;       ///< the link with the most bytes per bandwidth in a step
  std::string bottleneck_class;      ///< "nvlink", "pcie", "socket", "network"
  double bottleneck_Bps = 0.0;       ///< its bandwidth
  double bottleneck_bytes = 0.0;     ///< wire bytes it carries per step (all channels)
  double estimate_us = 0.0;          ///< launch + steps × (hop latency + bottleneck bytes / bandwidth)
  double simulated_us = 0.0;         ///< collective_time: what the simulator says
};

/// Explains `kind` of `bytes` per GPU (as collective_time takes it) over `gpus` GPUs of `c`.
CollectiveExplanation explain_collective(const Cluster& c, CollectiveKind kind, int gpus, double bytes);

}  // namespace moesim
