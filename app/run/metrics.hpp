#pragma once
// Turns task timings into the metrics of DESIGN.md (layer latency, TTFT, throughput, idle
// fraction, all-to-all time, bytes by class, load, drops, memory), per batch and over the run.
// A batch's tasks are observed by a BatchRecorder as they finish (app/batch_recorder.hpp).
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/run/batch_recorder.hpp"
#include "app/run/gpu_time.hpp"
#include "app/run/layer_breakdown.hpp"
#include "hardware/cluster.hpp"
#include "serving/batch_planner.hpp"
#include "sim/plan_executor.hpp"

namespace moesim {

// --- per batch and per run ----------------------------------------------------------------------

/// One batch's observations: an element of result.json's `per_batch`. Layer-level values are
/// means over the batch's MoE layers.
struct BatchMetrics {
  int batch = 0;              ///< index in execution order (the workload's batch number)
  Tick start = 0;             ///< simulated time the batch began
  Tick duration = 0;          ///< start to its last task's end (what the batch occupies the cluster)
  Tick ttft = 0;              ///< start to the end of its last layer: every sequence's first token.
                              ///< Shorter than `duration` only when work outside any layer trails
                              ///< it (e.g. HarMoEny's restores of overwritten experts)
  std::int64_t tokens = 0;
  std::int64_t tokens_dropped = 0;
  double layer_latency_ms = 0.0;
  double alltoall_ms = 0.0;
  double skewness = 0.0;
  double gpu_max_over_mean = 0.0;
  double predictor_overhead_ms = 0.0;  ///< the forecasts' overhead (MoE-GPS §3.2.2)
  double prediction_error = 0.0;       ///< the forecasts' ε (MoE-GPS §3.3); 0 without forecasts

  double throughput_tokens_per_s() const;
  nlohmann::json to_json() const;
};

/// GRACE-MoE §5.1's load balance metric: the standard deviation of the selections each GPU
/// computes in one MoE layer.
double gpu_load_std(const std::vector<std::int64_t>& gpu_tokens);

/// The mean of `v` (0 when empty), summed in order.
double mean_of(const std::vector<double>& v);
/// The largest of `v` (0 when empty).
double max_of(const std::vector<double>& v);

/// A mean kept as its running sum: the same bits as mean_of over the values in the order added
/// (a left fold from 0), without keeping them.
class RunningMean {
 public:
  void add(double v) {
    sum_ += v;
    ++n_;
  }
  double mean() const { return n_ == 0 ? 0.0 : sum_ / static_cast<double>(n_); }

 private:
  double sum_ = 0.0;
  std::size_t n_ = 0;
};

/// A running mean and maximum: the bits mean_of and max_of give over the same values in the
/// order added, without keeping them (a layer-queue run adds one per execution, ~10^6).
class RunningStat {
 public:
  void add(double v) {
    mean_.add(v);
    max_ = n_++ == 0 ? v : std::max(max_, v);
  }
  double mean() const { return mean_.mean(); }
  double max() const { return n_ == 0 ? 0.0 : max_; }

 private:
  RunningMean mean_;
  double max_ = 0.0;
  std::size_t n_ = 0;
};

/// result.json's `load`, for prefill batches and serving steps alike: each MoE layer's routing
/// skewness and how unevenly its selections fall on the GPUs (max over mean, and GRACE-MoE §5.1's
/// standard deviation).
struct LoadStats {
  RunningStat skewness;
  RunningStat gpu_imbalance;  ///< per MoE layer: the busiest GPU's selections over the mean
  RunningStat gpu_load_std;   ///< per MoE layer: std dev of selections per GPU
  /// One MoE layer's selections per GPU. A layer without selections counts as balanced when
  /// `count_empty` (a prefill batch's layer) and not at all otherwise (a serving step's, whose
  /// imbalance is then NaN and not added).
  /// Returns the layer's imbalance (the busiest GPU over the mean).
  double add_layer(const std::vector<std::int64_t>& gpu_tokens, bool count_empty);
  nlohmann::json to_json() const;
};

/// Accumulates per-batch observations and summarises them.
class MetricsCollector {
 public:
  explicit MetricsCollector(const Cluster& cluster);

  /// Starts observing a batch that begins at `start`: its tasks go to the returned recorder as
  /// they finish, which counts their bytes into this collector (warm-up batches are never observed).
  BatchRecorder begin_batch(Tick start) { return BatchRecorder(cluster_, start, bytes_); }
  /// Records one executed batch from what `observed` saw (finished). `moe` is the policy's report,
  /// `skewness` and `forecasts` (what the predictor said before each layer; empty: no predictor)
  /// are per MoE layer (only a forecast's overhead and error are read). `batch` is the workload's
  /// batch number.
  void add_batch(int batch, const BatchRecorder& observed, const std::vector<MoeLayerOutput>& moe,
                 const std::vector<double>& skewness, std::int64_t tokens,
                 const std::vector<Forecast>& forecasts = {});
  void set_memory(std::vector<double> per_gpu_bytes) { memory_ = std::move(per_gpu_bytes); }
  nlohmann::json summary() const;

 private:
  const Cluster& cluster_;
  std::vector<double> layer_ms_;      ///< per (batch, MoE layer)
  std::vector<LayerBreakdown> layer_parts_;  ///< per (batch, MoE layer): layer_ms_ by activity
  std::vector<double> alltoall_ms_;   ///< per (batch, MoE layer)
  LoadStats load_;  ///< per (batch, MoE layer)
  std::vector<double> overhead_ms_;   ///< per (batch, MoE layer) with a forecast
  std::vector<double> error_;         ///< per (batch, MoE layer) with a forecast
  std::vector<BatchMetrics> batches_;
  std::vector<GpuTime> gpu_time_;     ///< per GPU, summed over batches
  Tick total_time_ = 0;
  std::int64_t tokens_ = 0;
  std::int64_t dropped_ = 0;
  TrafficBytes bytes_;
  std::vector<double> memory_;
};

/// {mean, p50, p99} of `v` (nearest-rank percentiles; p90 too when asked); zeros when empty.
nlohmann::json distribution_summary(std::vector<double> v, bool with_p90 = false);
/// The same summary of a sample given as its distinct values, ascending, each with how many
/// times it occurs (InterTokenGaps::ascending): the same figures, bit for bit, as the sample
/// itself gives, its mean summed in the same order.
nlohmann::json distribution_summary(const std::vector<std::pair<double, std::uint64_t>>& ascending, bool with_p90 = false);

}  // namespace moesim
