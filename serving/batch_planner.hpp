#pragma once
// Plans one prefill batch: every GPU holds a contiguous block of the batch's sequences, each a
// whole prompt of seq_len tokens. A prefill batch is the step of serving/step_planner.hpp in
// which every sequence is prefilled at once.
#include <cstdint>
#include <vector>

#include "models/workload.hpp"
#include "serving/step_planner.hpp"

namespace moesim {

/// A batch's plan: a step's plan.
using BatchPlan = StepPlan;

/// The step shape of a batch of the context's prefill workload: each GPU's sequences, whole prompts.
StepShape prefill_shape(const PolicyContext& ctx);

/// Plans batch `batch` of the context's prefill workload; `routing[i]` is the routing of the
/// i-th MoE layer and `forecasts[i]`, if given, what the predictor forecast for it.
BatchPlan plan_batch(Policy& policy, const PolicyContext& ctx, int batch,
                     const std::vector<LayerRouting>& routing, const std::vector<Forecast>* forecasts = nullptr);

}  // namespace moesim
