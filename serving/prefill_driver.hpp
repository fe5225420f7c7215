#pragma once
// The prefill workload's driver: a run's batches, one after another on one executor. Beside the
// serving engine (which drives requests), it is the other way the layers above run a policy:
// app/ wires it and records what it reports, and decides nothing of the loop.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "policies/policy.hpp"
#include "predictors/predictor.hpp"
#include "serving/batch_feed.hpp"
#include "sim/plan_executor.hpp"

namespace moesim {

/// Runs batches 0..n-1 of a prefill workload. Each batch is planned a layer at a time while it
/// runs (BatchFeed, PlanExecutor::run_fed), so finished layers are dropped and a large cluster's
/// batch never holds its whole graph; a traced batch is planned whole first, with the same plan,
/// timings and observations. After each batch the predictor learns its routings (when it
/// observes) and the per-GPU expert rows are folded into the run's peak.
class PrefillDriver {
 public:
  /// What the layers above see of the loop.
  struct Hooks {
    /// Batch b is about to run: the observer of its tasks, or null (a warm-up batch).
    std::function<BatchObserver*(int batch)> begin_batch;
    /// Batch b has run and its observer has every task; `feed` holds what its planning produced.
    std::function<void(int batch, const BatchFeed& feed)> end_batch;
    /// Set to trace: every batch is planned whole and handed here with its timings.
    std::function<void(int batch, const TaskGraph& plan, const std::vector<TaskTiming>& timing)> trace;
  };

  /// `home` holds the batch's tokens per GPU. Every reference must outlive the driver.
  PrefillDriver(PlanExecutor& exec, Policy& policy, const PolicyContext& ctx, const RoutingModel& routing,
                Predictor& predictor, const BatchDraws& draws, const std::vector<std::int64_t>& home);

  /// Runs `batches` batches from the executor's current time.
  void run(int batches, const Hooks& hooks);

  /// The most expert rows (padding included) any batch's MoE layer put on each GPU.
  const std::vector<std::int64_t>& peak_selections() const { return peak_selections_; }

 private:
  void run_batch(int batch, const Hooks& hooks);

  PlanExecutor& exec_;
  Policy& policy_;
  const PolicyContext& ctx_;
  const RoutingModel& routing_;
  Predictor& predictor_;
  BatchDraws draws_;
  const std::vector<std::int64_t>& home_;
  std::vector<std::int64_t> peak_selections_;
};

}  // namespace moesim
