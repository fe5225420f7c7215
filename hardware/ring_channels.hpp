#pragma once
// Ring channels for ring collectives: the GPU orders the flows follow and each channel's share of
// the data (collectives.cpp builds the flows; NCCL's channel count for pricing is nccl_tuning's).
#include <vector>

#include "hardware/cluster.hpp"

namespace moesim {

/// A ring through `gpus` that prefers the fattest next hop (NCCL builds NVLink rings similarly).
std::vector<int> ring_order(const Cluster& cluster, const std::vector<int>& gpus);
/// Up to `max_rings` rings ("channels", as NCCL runs them) through `gpus`, each built greedily
/// over the links the previous rings used least, so that a mesh's parallel links all carry data.
/// Stops when a new ring would only reuse links, or would need links under half as fast as the
/// first ring's. Each channel's share of the data balances the links' loads: the shares minimise
/// the busiest link's time, so a full mesh's rings use every peer link evenly.
struct RingChannel {
  std::vector<int> order;       ///< GPUs in ring order
  double bottleneck_Bps = 0.0;  ///< narrowest hop of the ring
  double share = 1.0;           ///< fraction of every step's data this channel carries (shares sum to 1)
};
std::vector<RingChannel> ring_channels(const Cluster& cluster, const std::vector<int>& gpus, int max_rings);

/// Channels a ring collective's flows use at most (ring_channels' `max_rings`): NCCL's own ceiling
/// (32) is far above; 12 is what the 4-GPU full mesh needs for its balanced shares to load all 12
/// directed peer links evenly (8 reached 2/3 of them). NCCL's channel count for pricing is separate
/// (nccl_topology).
inline constexpr int kMaxRingChannels = 12;

}  // namespace moesim
