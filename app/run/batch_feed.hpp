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

#include "app/run/batch_recorder.hpp"
#include "app/scenario/scenario.hpp"
#include "policies/policy.hpp"
#include "predictors/predictor.hpp"
#include "serving/step_planner.hpp"

namespace moesim {

/// Plans batch `batch` a layer per part and observes it part by part.
class BatchFeed final : public PlanFeed {
 public:
  /// `home` holds the batch's tokens per GPU; layers are routed by count when `by_count`.
  /// `recorder` (null for a warm-up batch) receives the finished tasks. Every reference must
  /// outlive the feed.
  BatchFeed(const Scenario& s, Policy& policy, const PolicyContext& ctx, const RoutingModel& routing,
            Predictor& predictor, bool by_count, int batch, const std::vector<std::int64_t>& home,
            BatchRecorder* recorder);

  /// Plans the next layer (the first part also holds the batch's start).
  bool extend(TaskGraph& plan) override;
  /// Hands the tasks to the recorder and closes the layers whose parts have all finished.
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
  const Scenario& s_;
  Policy& policy_;
  const PolicyContext& ctx_;
  const RoutingModel& routing_;
  Predictor& predictor_;
  bool by_count_;
  int batch_;
  const std::vector<std::int64_t>& home_;
  BatchRecorder* recorder_;
  std::optional<StepBuilder> builder_;
  std::vector<TaskId> part_end_;  ///< per part (= model layer): the plan's size after it
  int closed_parts_ = 0;
  std::vector<MoeLayerOutput> moe_;
  std::vector<double> skew_;
  std::vector<Forecast> forecasts_;
  std::vector<LayerRouting> routings_;
};

}  // namespace moesim
