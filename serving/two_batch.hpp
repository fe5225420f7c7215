#pragma once
// Two-batch overlap (serving.two_batch_overlap; SGLang --enable-two-batch-overlap, DeepSeek's
// inference system): a step split into two micro-batches whose chains share each GPU's compute
// stream and the links, so one's kernels run while the other's dispatch and combine are in
// flight.
#include <optional>
#include <vector>

#include "models/routing.hpp"
#include "serving/step_planner.hpp"

namespace moesim {

/// A step's two halves, and the tokens of each (laid out GPU by GPU, as the step's).
struct TwoBatches {
  StepShape first, second;
  std::vector<TokenRef> first_tokens, second_tokens;
};

/// Splits `shape`: on each GPU the first half of its sequences (of a lone chunk of several
/// tokens, its first half of tokens) and of its drafts go to the first micro-batch, the rest to
/// the second, which carries no host time and no swaps. `tokens` (empty under count-level
/// routing) are split the same way. Nothing when the second half would be empty everywhere.
std::optional<TwoBatches> split_two_batches(const StepShape& shape, const std::vector<TokenRef>& tokens);

/// Plans one step into `sp` (cleared first) as two micro-batches (two-batch overlap): `first` and `second` are the step's
/// halves, each routed by its own list; both chains share the GPUs' compute streams and links,
/// so one's computation runs while the other's dispatch and combine are in flight. The report
/// per MoE layer sums the two.
void plan_two_batch_step_into(StepPlan& sp, Policy& policy, const PolicyContext& ctx, int step, const StepShape& first,
                             const StepShape& second, const std::vector<LayerRouting>& routing_first,
                             const std::vector<LayerRouting>& routing_second,
                             const std::vector<Forecast>* forecasts = nullptr);

}  // namespace moesim
