#pragma once
// Metrics of a serving run (DESIGN.md): per request TTFT, inter-token latencies, TPOT, end-to-end
// latency and queueing delay; throughput, achieved request rate, goodput under SLOs,
// preemptions and KV-cache use; and, from the executed steps, today's per-GPU idle time, bytes
// by class and expert load. Warm-up requests are simulated but left out of the request metrics.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/run/gpu_time.hpp"
#include "app/run/metrics.hpp"
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

/// The interval a serving run's rates are measured over, and whether the run reached a steady
/// state (issue 30). It opens at the first measured arrival. A steady run (below capacity, or
/// near it) closes at the last measured arrival: the window is the time the offered load is on,
/// and rates match the offered rate. A run that never reaches a steady state, because the
/// deployment falls further behind with every request, closes at the last measured completion:
/// rates are the work the deployment completed over the time it took, which for a long run is
/// the rate it sustains. (Closing at the last arrival there measured ramp-up only: 0 tokens/s for
/// AMoE in the example.) An offline batch (every measured request arriving at once) is
/// measured to its last completion.
///
/// A steady state shows in the completions: while the measured requests arrive, a deployment
/// that keeps up completes about as many requests as arrive (with the warm-up longer than a
/// request's life, docs/guide.md "Metrics"). A run that completes fewer than 90% as many is not steady:
/// it falls further behind with every request (the work queues for a first token, or crowds the
/// running batch so that every step is slower), or it is a transient shorter than one request's
/// life. Either way the arrival window does not hold its rate.
struct MeasurementWindow {
  static constexpr double kSteadyServedFraction = 0.9;

  Tick start = 0, end = 0;
  bool steady = true;
  bool ends_at_completion = false;  ///< closed at the last completion (not steady, or an offline batch)
  double served_fraction = 1.0;     ///< completions while the measured requests arrived, per arrival
  std::int64_t measured = 0;        ///< requests past the warm-up
  Tick first_arrival = 0, last_arrival = 0, last_first_token = 0, last_finish = 0;  ///< of the measured requests
  std::int64_t backlog_at_last_arrival = 0;  ///< measured requests with no token yet at the last arrival
  std::int64_t measured_output_tokens = 0;   ///< output tokens of the measured requests

  static MeasurementWindow of(const std::vector<Request>& requests, std::int64_t warmup_requests);
  /// How long after the last arrival the last measured request had its first token.
  Tick backlog_cleared() const { return last_first_token > last_arrival ? last_first_token - last_arrival : 0; }
  nlohmann::json to_json() const;  ///< result.json's `measurement_window`
};

/// Accumulates executed steps; summarises them with the engine's requests.
class ServingMetrics {
 public:
  ServingMetrics(const Cluster& cluster, std::int64_t warmup_requests);
  // The step recorder counts into bytes_: the object stays where it was built.
  ServingMetrics(const ServingMetrics&) = delete;
  ServingMetrics& operator=(const ServingMetrics&) = delete;

  void add_step(const StepRecord& step);
  /// A KV-cache hand-over between pools (bytes only).
  void add_transfer(const TaskGraph& graph);
  /// Layer-queue mode (serving/amoe/layer_queues.hpp), which has no steps: an execution (one
  /// layer on one GPU) counts as a step in `steps` (its tokens in prefill and decode tokens at
  /// block 0, where every token enters), its routing in `load.skewness`, its tasks in the GPUs'
  /// time; a message counts its bytes, its time on the GPUs, and its time from NCCL's launch
  /// to arrival as one `alltoall_ms` sample (a dispatch or a combine).
  void add_execution(const ExecutionRecord& e);
  void add_message(const TaskGraph& graph, const std::vector<TaskTiming>& timing);
  /// Layer-queue mode: no execution or message reported later started before `horizon`.
  void advance(Tick horizon);
  /// result.json's `metrics` for a serving run.
  nlohmann::json summary(const ServingOutcome& engine, const SchedulerConfig& config) const;

 private:
  /// Per request (latencies, the measurement window, throughput, SLOs), per MoE layer (latency,
  /// all-to-all), preemptions and KV-cache use.
  nlohmann::json request_summary(const ServingOutcome& engine, const SchedulerConfig& config) const;
  /// What the executed work adds: GPU time, bytes, load, dropped tokens, steps, makespan.
  void add_execution_summary(nlohmann::json& m, const ServingOutcome& engine) const;

  const Cluster& cluster_;
  std::int64_t warmup_;
  std::vector<GpuTime> gpu_time_;  ///< per GPU, summed over its pool's steps
  std::optional<GpuTimeSweep> unstepped_time_;  ///< layer-queue mode: executions and messages
  TrafficBytes bytes_;
  std::optional<BatchRecorder> step_recorder_;  ///< every step's, reset for each (counts into bytes_)
  LoadStats load_;  ///< per MoE layer planned (a sampled layer once)
  std::vector<double> step_ms_, decode_step_ms_;
  std::vector<double> moe_layer_ms_;  ///< per MoE layer of every step
  /// All-to-all time per MoE layer of every step, or per layer-queue message (millions of them):
  /// only its mean is reported, so only the running sum is kept.
  RunningMean alltoall_ms_;
  std::int64_t steps_ = 0;
  std::int64_t dropped_ = 0;
  std::int64_t prefill_tokens_ = 0, decode_tokens_ = 0;
};

/// Appends to `run["warnings"]` a warning that the run never reached a steady state, when its
/// metrics say so (`steady_state` false), with what it measured instead.
void add_steady_state_warning(nlohmann::json& run);

/// metric-set (core/invariants.hpp): a serving run's metrics hold every key each engine mode
/// reports (colocated, disaggregated, layer queues), and nothing else.
void check_metric_set(const nlohmann::json& metrics);

/// requests.csv's header line (with its newline).
std::string requests_csv_header();
/// requests.csv's rows: one per request of run `label`.
void write_requests_csv(std::ostream& out, const std::string& label, const std::vector<Request>& requests,
                        std::int64_t warmup_requests);

}  // namespace moesim
