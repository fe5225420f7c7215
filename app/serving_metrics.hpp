#pragma once
// Metrics of a serving run (DESIGN.md): per request TTFT, inter-token latencies, TPOT, end-to-end
// latency and queueing delay; throughput, achieved request rate, goodput under SLOs,
// preemptions and KV-cache use; and, from the executed steps, today's per-GPU idle time, bytes
// by class and expert load. Warm-up requests are simulated but left out of the request metrics.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/metrics.hpp"
#include "serving/engine.hpp"

namespace moesim {

/// One request's latencies (milliseconds), as requests.csv and the distributions see them.
struct RequestLatency {
  double ttft_ms = 0.0;
  double e2e_ms = 0.0;
  double queue_delay_ms = 0.0;
  double tpot_ms = 0.0;  ///< (e2e − TTFT) / (output − 1); 0 for a one-token output
  bool has_tpot = false;
};
RequestLatency request_latency(const Request& r);

/// Accumulates executed steps; summarises them with the engine's requests.
class ServingMetrics {
 public:
  ServingMetrics(const Cluster& cluster, std::int64_t warmup_requests);

  void add_step(const StepRecord& step);
  /// A KV-cache hand-over between pools (bytes only).
  void add_transfer(const TaskGraph& graph);
  /// result.json's `metrics` for a serving run.
  /// Busy time of `gpu` outside any step (AMoE's runtimes execute layers, not steps).
  void add_gpu_busy(int gpu, Tick compute, Tick scheduling);
  nlohmann::json summary(const ServingOutcome& engine, const SchedulerConfig& config) const;

 private:
  const Cluster& cluster_;
  std::int64_t warmup_;
  std::vector<GpuTime> gpu_time_;  ///< per GPU, summed over its pool's steps
  TrafficBytes bytes_;
  std::vector<double> skewness_, gpu_imbalance_, gpu_load_std_, step_ms_, decode_step_ms_;
  std::vector<double> moe_layer_ms_, alltoall_ms_;  ///< per MoE layer of every step
  std::int64_t steps_ = 0;
  std::int64_t dropped_ = 0;
  std::int64_t prefill_tokens_ = 0, decode_tokens_ = 0;
};

/// requests.csv's header line (with its newline).
std::string requests_csv_header();
/// requests.csv's rows: one per request of run `label`.
void write_requests_csv(std::ostream& out, const std::string& label, const std::vector<Request>& requests,
                        std::int64_t warmup_requests);

}  // namespace moesim
