#pragma once
// AMoE's layer schedulers (§3.4): when a runtime's GPU becomes idle, which of its μ-queues to
// drain. A runtime hosts one layer per block (an attention GPU: block b's attention) or several
// (an expert GPU: block b's copy of each expert it holds); the queue of (block b, slot e) holds
// Q[b][e] tokens.
//  - mtfs   most-token-first-serve: the queue with the most tokens;
//  - flfs   first-layer-first-serve: the lowest block with any tokens (its fullest slot);
//  - defrag Algorithm 1: Q[b][e] plus a lookahead over the next K blocks (cyclically, as
//           decoding wraps from the last block to the first), Σ_k (Σ_e' Q[b+k][e'] / N_e)·δ^k.
// Ties go to the lowest (block, slot), so a run is deterministic.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace moesim {

enum class LayerSchedule { kMtfs, kFlfs, kDefrag };

/// "mtfs", "flfs", "defrag" (false for another name).
bool parse_layer_schedule(const std::string& name, LayerSchedule& out);

/// Algorithm 1's lookahead: K blocks, decayed by δ per block.
struct DefragParams {
  int lookahead_blocks = 2;  ///< K
  double decay = 0.5;        ///< δ
};

/// Tokens queued per (block, slot) of one runtime: q[b][e].
using QueueDepths = std::vector<std::vector<std::int64_t>>;

/// The (block, slot) to drain next, or nothing when every queue is empty.
std::optional<std::pair<int, int>> pick_queue(LayerSchedule s, const QueueDepths& q, const DefragParams& p = {});

}  // namespace moesim
