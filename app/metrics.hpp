#pragma once
// Turns task timings into the metrics of DESIGN.md (layer latency, TTFT, throughput, idle
// fraction, all-to-all time, bytes by class, load, drops, memory), per batch and over the run,
// and the per-GPU time breakdown.
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/gpu_time.hpp"
#include "hardware/cluster.hpp"
#include "policies/batch_planner.hpp"
#include "sim/plan_executor.hpp"

namespace moesim {

/// One batch's observations: an element of result.json's `per_batch`. Layer-level values are
/// means over the batch's MoE layers.
struct BatchMetrics {
  int batch = 0;              ///< index in execution order (the workload's batch number)
  Tick start = 0;             ///< simulated time the batch began
  Tick duration = 0;          ///< start to its last task's end (its TTFT in prefill)
  std::int64_t tokens = 0;
  std::int64_t tokens_dropped = 0;
  double layer_latency_ms = 0.0;
  double alltoall_ms = 0.0;
  double skewness = 0.0;
  double gpu_max_over_mean = 0.0;

  double throughput_tokens_per_s() const;
  nlohmann::json to_json() const;
};

/// Accumulates per-batch observations and summarises them.
class MetricsCollector {
 public:
  explicit MetricsCollector(const Cluster& cluster);

  /// Records one executed batch that started at `start`. `skewness` is per MoE layer. Batches
  /// are numbered in the order they are added.
  void add_batch(const BatchPlan& plan, const std::vector<TaskTiming>& timing, Tick start,
                 const std::vector<double>& skewness, std::int64_t tokens);
  void set_memory(std::vector<double> per_gpu_bytes) { memory_ = std::move(per_gpu_bytes); }
  nlohmann::json summary() const;

 private:
  const Cluster& cluster_;
  std::vector<double> layer_ms_;      ///< per (batch, MoE layer)
  std::vector<double> alltoall_ms_;   ///< per (batch, MoE layer)
  std::vector<double> skewness_;      ///< per (batch, MoE layer)
  std::vector<double> gpu_imbalance_; ///< per (batch, MoE layer)
  std::vector<BatchMetrics> batches_;
  std::vector<GpuTime> gpu_time_;     ///< per GPU, summed over batches
  Tick total_time_ = 0;
  std::int64_t tokens_ = 0;
  std::int64_t dropped_ = 0;
  double bytes_intra_ = 0.0, bytes_inter_ = 0.0, bytes_h2d_ = 0.0;
  std::vector<double> memory_;
};

/// {mean, p50, p99} of `v` (nearest-rank percentiles); zeros when empty.
nlohmann::json distribution_summary(std::vector<double> v);

}  // namespace moesim
