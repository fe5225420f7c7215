#pragma once
// Turns task timings into the metrics of DESIGN.md (layer latency, TTFT, throughput, idle
// fraction, all-to-all time, bytes by class, load, drops, memory).
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "hardware/cluster.hpp"
#include "policies/batch_planner.hpp"
#include "sim/plan_executor.hpp"

namespace moesim {

/// Accumulates per-batch observations and summarises them.
class MetricsCollector {
 public:
  explicit MetricsCollector(const Cluster& cluster);

  /// Records one executed batch that started at `start`. `skewness` is per MoE layer.
  void add_batch(const BatchPlan& plan, const std::vector<TaskTiming>& timing, Tick start,
                 const std::vector<double>& skewness, std::int64_t tokens);
  void set_memory(std::vector<double> per_gpu_bytes) { memory_ = std::move(per_gpu_bytes); }
  nlohmann::json summary() const;

 private:
  const Cluster& cluster_;
  std::vector<double> layer_ms_;      ///< per (batch, MoE layer)
  std::vector<double> ttft_ms_;       ///< per batch
  std::vector<double> alltoall_ms_;   ///< per (batch, MoE layer)
  std::vector<double> skewness_;      ///< per (batch, MoE layer)
  std::vector<double> gpu_imbalance_; ///< per (batch, MoE layer)
  std::vector<Tick> busy_;            ///< per GPU: computing or copying
  Tick total_time_ = 0;
  std::int64_t tokens_ = 0;
  std::int64_t dropped_ = 0;
  double bytes_intra_ = 0.0, bytes_inter_ = 0.0, bytes_h2d_ = 0.0;
  std::vector<double> memory_;
};

/// {mean, p50, p99} of `v` (nearest-rank percentiles); zeros when empty.
nlohmann::json distribution_summary(std::vector<double> v);

}  // namespace moesim
