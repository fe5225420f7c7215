#pragma once
// The placement step of the `eplb` policy (DeepSeek EPLB, public), usable on its own.
#include <vector>

namespace moesim {

/// EPLB placement of one layer: the GPU of every replica of every expert, given per-expert
/// `load`, `redundant` extra replicas and `gpus` GPUs over `nodes` equal nodes (GPU g on node
/// g / (gpus / nodes)). Requires (E + redundant) % gpus == 0. Hierarchical packing places experts
/// on nodes first, then replicas on each node's GPUs.
std::vector<std::vector<int>> eplb_place(const std::vector<double>& load, int redundant, int gpus, int nodes,
                                         bool hierarchical);

}  // namespace moesim
