#include "serving/batch_feed.hpp"

#include "core/rng.hpp"
#include "serving/batch_planner.hpp"

namespace moesim {

BatchFeed::BatchFeed(const BatchDraws& draws, Policy& policy, const PolicyContext& ctx, const RoutingModel& routing,
                     Predictor& predictor, int batch, const std::vector<std::int64_t>& home, BatchObserver* observer)
    : draws_(draws),
      policy_(policy),
      ctx_(ctx),
      routing_(routing),
      predictor_(predictor),
      batch_(batch),
      home_(home),
      observer_(observer) {}

// A MoE layer is routed and forecast as it is planned. Each layer draws from streams of its own
// (batch, layer), and the predictor only learns after the batch, so the draws and forecasts are
// those of routing every layer first; the forecast is still made before the layer's attention.
bool BatchFeed::extend(TaskGraph& plan) {
  if (!builder_) builder_.emplace(policy_, ctx_, batch_, prefill_shape(ctx_), plan);
  if (builder_->next_is_moe()) {
    const int l = builder_->next_moe_index();
    const auto ub = static_cast<std::uint64_t>(batch_), ul = static_cast<std::uint64_t>(l);
    Rng rng = Rng::derive(draws_.seed, Stream::kBatchRouting, ub, ul);
    LayerRouting layer = draws_.by_count ? routing_.route_counts(batch_, l, home_, rng)
                                   : routing_.route(batch_, l, draws_.tokens_per_batch, rng);
    skew_.push_back(layer.skewness());
    Rng frng = Rng::derive(draws_.seed, Stream::kBatchPredictor, ub, ul);
    const Forecast forecast = predictor_.forecast(batch_, l, layer, frng);
    builder_->add_layer(plan, &layer, &forecast);
    moe_.push_back(builder_->take_moe_output());
    Forecast kept;  // what the metrics read: a token forecast's predictions can be large
    kept.kind = forecast.kind;
    kept.error = forecast.error;
    kept.overhead_ms = forecast.overhead_ms;
    forecasts_.push_back(std::move(kept));
    if (predictor_.observes()) routings_.push_back(std::move(layer));
  } else {
    builder_->add_layer(plan, nullptr, nullptr);
  }
  part_end_.push_back(static_cast<TaskId>(plan.size()));
  return !builder_->done();
}

void BatchFeed::retire(const TaskGraph& plan, TaskId first, std::span<const TaskTiming> timing, Tick horizon) {
  if (!observer_) return;
  observer_->add(plan, first, timing, horizon);
  // Part p holds model layer p's tasks (and tasks of no layer): a layer is complete with its part.
  const auto end = first + static_cast<TaskId>(timing.size());
  while (closed_parts_ < static_cast<int>(part_end_.size()) && part_end_[static_cast<std::size_t>(closed_parts_)] <= end)
    ++closed_parts_;
  observer_->close_layers(closed_parts_);
}

void BatchFeed::plan_all(TaskGraph& plan) {
  while (extend(plan)) {
  }
}

}  // namespace moesim
