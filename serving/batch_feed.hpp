#pragma once
// One prefill batch planned layer by layer while the engine runs it (PlanExecutor::run_fed),
// rather than its whole task graph built up front: each MoE layer is routed, forecast and planned
// just before it can start, and each finished layer is handed to the batch's recorder and
// dropped. On a large cluster a batch's graph through every layer is gigabytes; a window of
// layers is a small share of it. The same feed can also plan the whole batch at once (for a
// trace, which needs every task), with identical results.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "policies/policy.hpp"
#include "predictors/predictor.hpp"
#include "serving/step_planner.hpp"
#include "sim/plan_executor.hpp"

namespace moesim {

/// What watches a prefill batch's tasks finish (the metrics' recorder, above serving/). Tasks come
/// in id order, each exactly once; `close_layers(n)` says model layers before n have no task left.
class BatchObserver {
 public:
  virtual ~BatchObserver() = default;
  /// Tasks [first, first + timing.size()) of the batch's plan, finished; none handed over later
  /// starts before `horizon`.
  virtual void add(const TaskGraph& plan, TaskId first, std::span<const TaskTiming> timing, Tick horizon) = 0;
  virtual void close_layers(int layer) = 0;
};

/// How a run's batches are drawn: the scenario's seed and batch size, and count-level routing.
struct BatchDraws {
  std::uint64_t seed = 0;
  std::int64_t tokens_per_batch = 0;
  bool by_count = false;  ///< layers routed by count from the GPUs' home tokens (issue 13)
};

/// Plans batch `batch` a layer per part and observes it part by part.
class BatchFeed final : public PlanFeed {
 public:
  /// `home` holds the batch's tokens per GPU (read when `draws.by_count`). `observer` (null for
  /// a warm-up batch) receives the finished tasks. Every reference must outlive the feed.
  BatchFeed(const BatchDraws& draws, Policy& policy, const PolicyContext& ctx, const RoutingModel& routing,
            Predictor& predictor, int batch, const std::vector<std::int64_t>& home, BatchObserver* observer);

  /// Plans the next layer (the first part also holds the batch's start).
  bool extend(TaskGraph& plan) override;
  /// Hands the tasks to the observer and closes the layers whose parts have all finished.
  void retire(const TaskGraph& plan, TaskId first, std::span<const TaskTiming> timing, Tick horizon) override;
  /// Plans every layer into `plan` at once (the whole graph, for a trace).
  void plan_all(TaskGraph& plan);

  // What the batch's planning produced, per MoE layer (complete once every layer is planned).
  const std::vector<MoeLayerOutput>& moe() const { return moe_; }
  const std::vector<double>& skewness() const { return skew_; }
  /// The forecasts' overhead and error (their predictions are not kept).
  const std::vector<Forecast>& forecasts() const { return forecasts_; }
  /// The layers' routings, kept only for a predictor that observes them (Predictor::observes).
  const std::vector<LayerRouting>& routings() const { return routings_; }

 private:
  BatchDraws draws_;
  Policy& policy_;
  const PolicyContext& ctx_;
  const RoutingModel& routing_;
  Predictor& predictor_;
  int batch_;
  const std::vector<std::int64_t>& home_;
  BatchObserver* observer_;
  std::optional<StepBuilder> builder_;
  std::vector<TaskId> part_end_;  ///< per part (= model layer): the plan's size after it
  int closed_parts_ = 0;
  std::vector<MoeLayerOutput> moe_;
  std::vector<double> skew_;
  std::vector<Forecast> forecasts_;
  std::vector<LayerRouting> routings_;
};

}  // namespace moesim
