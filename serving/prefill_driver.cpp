#include "serving/prefill_driver.hpp"

#include <algorithm>

namespace moesim {

PrefillDriver::PrefillDriver(PlanExecutor& exec, Policy& policy, const PolicyContext& ctx, const RoutingModel& routing,
                             Predictor& predictor, const BatchDraws& draws, const std::vector<std::int64_t>& home)
    : exec_(exec),
      policy_(policy),
      ctx_(ctx),
      routing_(routing),
      predictor_(predictor),
      draws_(draws),
      home_(home),
      peak_selections_(home.size(), 0) {}

void PrefillDriver::run(int batches, const Hooks& hooks) {
  for (int b = 0; b < batches; ++b) run_batch(b, hooks);
}

void PrefillDriver::run_batch(int batch, const Hooks& hooks) {
  BatchObserver* observer = hooks.begin_batch ? hooks.begin_batch(batch) : nullptr;
  BatchFeed feed(draws_, policy_, ctx_, routing_, predictor_, batch, home_, observer);
  TaskGraph graph;
  if (hooks.trace) {
    // A trace needs every task: plan the batch whole, then hand it over as one part.
    feed.plan_all(graph);
    const std::vector<TaskTiming> timing = exec_.run(graph);
    feed.retire(graph, 0, timing, kTickMax);
    hooks.trace(batch, graph, timing);
  } else {
    exec_.run_fed(graph, feed);
  }
  if (hooks.end_batch) hooks.end_batch(batch, feed);
  // The predictor only learns after the batch (BatchFeed draws every layer's forecast first).
  if (predictor_.observes())
    for (std::size_t l = 0; l < feed.routings().size(); ++l)
      predictor_.observe(batch, static_cast<int>(l), feed.routings()[l]);
  for (const auto& moe : feed.moe()) {
    const auto& rows = moe.gpu_rows.empty() ? moe.gpu_tokens : moe.gpu_rows;  // padding takes memory too
    for (std::size_t g = 0; g < rows.size() && g < peak_selections_.size(); ++g)
      peak_selections_[g] = std::max(peak_selections_[g], rows[g]);
  }
}

}  // namespace moesim
