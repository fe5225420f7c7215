#pragma once
// The phases of an MoE layer that tasks are tagged with (sim/'s Phase is an opaque tag): what
// metrics, breakdowns and Chrome traces group a plan's tasks by. Phase{} is "other", the tag of a
// task nobody tagged.
#include "sim/task_graph.hpp"

namespace moesim::phase {

inline constexpr Phase kOther{0};
inline constexpr Phase kAttention{1};
inline constexpr Phase kRouter{2};
inline constexpr Phase kDispatch{3};    ///< token scatter to experts
inline constexpr Phase kExperts{4};
inline constexpr Phase kCombine{5};     ///< token gather back to their home GPU
inline constexpr Phase kMerge{6};       ///< weighted sum of expert outputs + residual
inline constexpr Phase kDense{7};       ///< non-MoE FFN layer
inline constexpr Phase kSchedule{8};    ///< policy's own CPU-side decision time
inline constexpr Phase kFetch{9};       ///< expert weights moved (host→device or peer)
inline constexpr Phase kCollective{10}; ///< other collectives (metadata exchange, all-reduce)
inline constexpr Phase kPredict{11};    ///< an expert-load predictor's online overhead

}  // namespace moesim::phase

namespace moesim {

/// "attention", "dispatch", ...: the phase's name in traces and metrics ("?" for an unknown tag).
const char* phase_name(Phase p);

}  // namespace moesim
