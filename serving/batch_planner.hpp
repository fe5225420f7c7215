#pragma once
// Builds the plan of one prefill batch through the whole model: attention data-parallel on every
// GPU (each GPU owns a contiguous block of the batch's sequences), dense FFN layers locally, and
// for each MoE layer the router followed by the policy's tasks. Layers chain per GPU, with no
// global barrier other than the ones the policy's collectives imply.
#include <cstdint>
#include <vector>

#include "policies/policy.hpp"
#include "predictors/forecast.hpp"

namespace moesim {

/// One batch's plan and what the policy reported per MoE layer.
struct BatchPlan {
  TaskGraph graph;
  std::vector<MoeLayerOutput> moe;      ///< per MoE layer
  std::vector<std::int64_t> home_tokens;  ///< tokens per GPU
};

/// Sequences of a batch per GPU: contiguous blocks, sizes differing by at most one.
std::vector<std::int64_t> sequences_per_gpu(std::int64_t batch_size, int gpus);

/// Plans batch `batch`; `routing[i]` is the routing of the i-th MoE layer and `forecasts[i]`, if
/// given, what the predictor forecast for it. A forecast's overhead is spent on every GPU before
/// that layer's attention (the predictor runs there, MoE-GPS §3.1).
BatchPlan plan_batch(Policy& policy, const PolicyContext& ctx, int batch,
                     const std::vector<LayerRouting>& routing, const std::vector<Forecast>* forecasts = nullptr);

}  // namespace moesim
