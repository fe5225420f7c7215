#pragma once
// Builds the task graph of one step through the whole model. Attention runs data-parallel: each
// GPU attends over the sequences it holds (prefill chunks and decode tokens together, priced by
// query tokens and KV length); dense FFN layers run locally; each MoE layer is the router
// followed by the policy's tasks. Layers chain per GPU, with no barrier other than those the
// policy's collectives imply. A prefill batch (serving/batch_planner.hpp) is the step in which
// every sequence is a whole prompt.
#include <cstdint>
#include <vector>

#include "models/operators.hpp"
#include "policies/policy.hpp"
#include "predictors/forecast.hpp"

namespace moesim {

/// What each GPU runs in one step: its sequences' chunks, and KV-cache swaps (bytes between the
/// GPU and its node's host memory) that must finish before its first layer.
struct StepShape {
  std::vector<std::vector<SeqChunk>> seqs;  ///< per GPU
  std::vector<double> swap_out_bytes;       ///< per GPU (empty: none)
  std::vector<double> swap_in_bytes;        ///< per GPU (empty: none)
  /// Tokens per GPU: the sum of its chunks' new tokens.
  std::vector<std::int64_t> home_tokens() const;
};

/// One step's plan and what the policy reported per MoE layer.
struct StepPlan {
  TaskGraph graph;
  std::vector<MoeLayerOutput> moe;        ///< per MoE layer
  std::vector<std::int64_t> home_tokens;  ///< tokens per GPU
};

/// Plans step `step` (the routing models' and policies' batch index). `routing[i]` routes the
/// i-th MoE layer's tokens, which are laid out GPU by GPU in `shape` order; `forecasts[i]`, if
/// given, is what the predictor forecast for that layer. A forecast's overhead is spent on
/// every GPU before that layer's attention (the predictor runs there, MoE-GPS §3.1).
StepPlan plan_step(Policy& policy, const PolicyContext& ctx, int step, const StepShape& shape,
                   const std::vector<LayerRouting>& routing, const std::vector<Forecast>* forecasts = nullptr);

}  // namespace moesim
