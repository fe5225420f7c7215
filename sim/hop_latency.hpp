#pragma once
// Whether a transfer waits for its route's per-hop latencies before moving bytes (shared by the
// plan's tasks and the network backends, which otherwise do not know each other).
#include <cstdint>

namespace moesim {

/// kPaid: the flow waits for the sum of its links' latencies, then moves bytes. kInLaunch: it moves
/// bytes at once, because the delay before it already paid them: collectives priced by NCCL's
/// tuning model carry NCCL's whole latency, hops included, in their launch delay.
enum class HopLatency : std::int8_t { kPaid, kInLaunch };

}  // namespace moesim
