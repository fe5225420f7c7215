#pragma once
// Turns task timings into the metrics of DESIGN.md (layer latency, TTFT, throughput, idle
// fraction, all-to-all time, bytes by class, load, drops, memory), per batch and over the run,
// and the per-GPU time breakdown.
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/layer_breakdown.hpp"
#include "hardware/cluster.hpp"
#include "serving/batch_planner.hpp"
#include "sim/plan_executor.hpp"

namespace moesim {

// --- per-GPU time breakdown (HarMoEny Fig. 4a and Fig. 9) -----------------------------------

/// Time one GPU spent in each class. Overlapping activities are counted once, by precedence
/// compute > copy > communication > scheduling (the classes of sim/chrome_trace.hpp's
/// gpu_uses: kCompute; kCopy; kSend and kReceive; kSchedule), and waiting is the rest, so the
/// five parts sum to the window's length.
struct GpuTime {
  Tick compute = 0;        ///< union of the compute stream's tasks
  Tick copy = 0;           ///< copy-engine transfers of this GPU, outside compute
  Tick communication = 0;  ///< network transfers it sends or receives, outside compute and copy
  Tick scheduling = 0;     ///< delay tasks on this GPU (CPU-side), outside all of the above
  Tick waiting = 0;        ///< none of the above

  /// Computing or copying: what gpu_idle_fraction counts as busy.
  Tick busy() const { return compute + copy; }
  Tick total() const { return compute + copy + communication + scheduling + waiting; }
  GpuTime& operator+=(const GpuTime& o);
};

/// Breakdown of every GPU over the window [start, end] of one executed plan (tasks outside the
/// window are clipped to it).
std::vector<GpuTime> gpu_time_breakdown(const TaskGraph& plan, const std::vector<TaskTiming>& timing,
                                        int num_gpus, Tick start, Tick end);

/// result.json's `gpu_time_breakdown`: {per_gpu_ms: [{compute, copy, communication, scheduling,
/// waiting}], mean_fraction: {same keys, each a share of `makespan` averaged over GPUs}}.
nlohmann::json gpu_time_json(const std::vector<GpuTime>& per_gpu, Tick makespan);

/// Bytes moved between endpoints, by class (result.json's `bytes`).
struct TrafficBytes {
  double intra_node = 0.0;
  double inter_node = 0.0;
  double host_to_device = 0.0;  ///< either direction between a GPU and host memory
  /// Counts a transfer task (others are ignored): host traffic, else by the endpoints' nodes.
  void add(const Task& t, const Cluster& cluster);
  nlohmann::json to_json() const;
};

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

/// Accumulates per-batch observations and summarises them.
class MetricsCollector {
 public:
  explicit MetricsCollector(const Cluster& cluster);

  /// Records one executed batch that started at `start`. `skewness` and `forecasts` (what the
  /// predictor said before each layer; empty: no predictor) are per MoE layer. `batch` is the
  /// workload's batch number (warm-up batches are never added).
  void add_batch(int batch, const BatchPlan& plan, const std::vector<TaskTiming>& timing, Tick start,
                 const std::vector<double>& skewness, std::int64_t tokens,
                 const std::vector<Forecast>& forecasts = {});
  void set_memory(std::vector<double> per_gpu_bytes) { memory_ = std::move(per_gpu_bytes); }
  nlohmann::json summary() const;

 private:
  const Cluster& cluster_;
  std::vector<double> layer_ms_;      ///< per (batch, MoE layer)
  std::vector<LayerBreakdown> layer_parts_;  ///< per (batch, MoE layer): layer_ms_ by activity
  std::vector<double> alltoall_ms_;   ///< per (batch, MoE layer)
  std::vector<double> skewness_;      ///< per (batch, MoE layer)
  std::vector<double> gpu_imbalance_; ///< per (batch, MoE layer)
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

}  // namespace moesim
