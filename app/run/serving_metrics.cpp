#include "app/run/serving_metrics.hpp"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <set>
#include <sstream>
#include <type_traits>
#include <utility>

#include "app/run/batch_recorder.hpp"
#include "core/invariants.hpp"
#include "sim/chrome_trace.hpp"

namespace moesim {

namespace {
double seconds(Tick t) { return ticks_to_seconds(t); }
}  // namespace

RequestLatency request_latency(const Request& r) {
  RequestLatency l;
  l.ttft_ms = ticks_to_ms(r.first_token - r.arrived);
  l.e2e_ms = ticks_to_ms(r.finished - r.arrived);
  l.queue_delay_ms = ticks_to_ms(r.first_scheduled - r.arrived);
  if (r.spec.output_tokens > 1) {
    l.tpot_ms = (l.e2e_ms - l.ttft_ms) / static_cast<double>(r.spec.output_tokens - 1);
    l.has_tpot = true;
  }
  return l;
}

MeasurementWindow MeasurementWindow::of(const std::vector<Request>& requests, std::int64_t warmup_requests) {
  MeasurementWindow w;
  Tick first_arrival = kTickMax;
  for (const Request& r : requests) {
    if (r.spec.id < warmup_requests) continue;
    ++w.measured;
    first_arrival = std::min(first_arrival, r.arrived);
    w.last_arrival = std::max(w.last_arrival, r.arrived);
    w.last_first_token = std::max(w.last_first_token, r.first_token);
    w.last_finish = std::max(w.last_finish, r.finished);
    w.measured_output_tokens += r.spec.output_tokens;
  }
  if (w.measured == 0) return w;
  w.first_arrival = w.start = first_arrival;
  if (w.last_arrival <= w.first_arrival) {
    // Measured requests that all arrive at one instant (an offline batch): measured to the end.
    w.end = w.last_finish;
    w.ends_at_completion = true;
    return w;
  }
  // Completions (warm-up requests' too) while the measured requests arrive, against those
  // arrivals (n − 1 gaps, as offered_rate_per_s counts them).
  std::int64_t served = 0;
  for (const Request& r : requests) {
    if (r.finished > w.first_arrival && r.finished <= w.last_arrival) ++served;
    if (r.spec.id >= warmup_requests && r.first_token > w.last_arrival) ++w.backlog_at_last_arrival;
  }
  w.served_fraction = static_cast<double>(served) / static_cast<double>(w.measured - 1);
  w.steady = w.served_fraction >= kSteadyServedFraction;
  w.end = w.steady ? w.last_arrival : w.last_finish;
  w.ends_at_completion = !w.steady;
  return w;
}

nlohmann::json MeasurementWindow::to_json() const {
  return {{"start_s", seconds(start)},
          {"end_s", seconds(end)},
          {"ends_at", ends_at_completion ? "last completion" : "last arrival"},
          {"backlog_at_last_arrival", backlog_at_last_arrival},
          {"backlog_cleared_after_last_arrival_s", seconds(backlog_cleared())},
          {"served_fraction", served_fraction}};
}

ServingMetrics::ServingMetrics(const Cluster& cluster, std::int64_t warmup_requests)
    : cluster_(cluster), warmup_(warmup_requests), gpu_time_(static_cast<std::size_t>(cluster.num_gpus())) {}

void ServingMetrics::add_step(const StepRecord& step) {
  const TaskGraph& g = step.plan->graph;
  // A pool's steps never overlap, and its GPUs are its own: each GPU's windows are disjoint.
  std::vector<GpuTime> unlayered;
  const std::vector<GpuTime>* t = &unlayered;
  if (!step.plan->moe.empty() && step.timing->size() == g.size()) {
    // Each MoE layer's latency and all-to-all window within the step, as a prefill batch
    // measures them; the same pass counts the step's transfers into the run's bytes and sweeps
    // the per-GPU breakdown (every task ends by the step's end, so nothing is clipped). Serving
    // reports no per-layer activity breakdown, so the recorder sweeps none.
    if (step_recorder_)
      step_recorder_->reset(step.start);
    else
      step_recorder_.emplace(cluster_, step.start, bytes_, /*layer_breakdown=*/false);
    BatchRecorder& layers = *step_recorder_;
    layers.add(g, 0, *step.timing, step.end);
    layers.finish();
    moe_layer_ms_.insert(moe_layer_ms_.end(), layers.layer_ms().begin(), layers.layer_ms().end());
    for (const double ms : layers.alltoall_ms()) alltoall_ms_.add(ms);
    t = &layers.gpu_time();
  } else {
    unlayered = gpu_time_breakdown(g, *step.timing, cluster_.num_gpus(), step.start, step.end);
    for (const Task& task : g.tasks()) bytes_.add(task, cluster_);
  }
  for (std::size_t gpu = 0; gpu < t->size(); ++gpu) {
    GpuTime busy = (*t)[gpu];
    busy.waiting = 0;  // waiting is what the run's length leaves, computed in the summary
    gpu_time_[gpu] += busy;
  }
  for (const MoeLayerOutput& moe : step.plan->moe) {
    dropped_ += moe.tokens_dropped * moe.repeat;  // a sampled layer stands for its block
    bytes_.intra_gpu += moe.local_bytes * moe.repeat;
    load_.add_layer(moe.gpu_tokens, false);
  }
  for (const double v : step.skewness) load_.skewness.add(v);
  const double ms = ticks_to_ms(step.end - step.start);
  step_ms_.push_back(ms);
  if (step.prefill_tokens == 0) decode_step_ms_.push_back(ms);
  prefill_tokens_ += step.prefill_tokens;
  decode_tokens_ += step.decode_tokens;
  ++steps_;
}

void ServingMetrics::add_transfer(const TaskGraph& graph) {
  for (const Task& task : graph.tasks()) bytes_.add(task, cluster_);
}

void ServingMetrics::add_execution(const ExecutionRecord& e) {
  if (!unstepped_time_) unstepped_time_.emplace(cluster_.num_gpus(), 0);
  for (TaskId i = 0; i < e.graph->size(); ++i) unstepped_time_->add(e.graph->task(i), (*e.timing)[i]);
  if (e.routing) load_.skewness.add(e.routing->skewness());
  const double ms = ticks_to_ms(e.end - e.start);
  step_ms_.push_back(ms);
  if (e.prefill_tokens == 0) decode_step_ms_.push_back(ms);
  if (e.attention && e.block == 0) {
    prefill_tokens_ += e.prefill_tokens;
    decode_tokens_ += e.tokens - e.prefill_tokens;
  }
  ++steps_;
}

void ServingMetrics::advance(Tick horizon) {
  if (unstepped_time_) unstepped_time_->advance(horizon);
}

void ServingMetrics::add_message(const TaskGraph& graph, const std::vector<TaskTiming>& timing) {
  if (!unstepped_time_) unstepped_time_.emplace(cluster_.num_gpus(), 0);
  Tick first = kTickMax, last = 0;
  for (TaskId i = 0; i < graph.size(); ++i) {
    const Task& t = graph.task(i);
    bytes_.add(t, cluster_);
    unstepped_time_->add(t, timing[i]);
    first = std::min(first, timing[i].start);
    last = std::max(last, timing[i].end);
  }
  if (last >= first) alltoall_ms_.add(ticks_to_ms(last - first));
}

nlohmann::json ServingMetrics::request_summary(const ServingOutcome& engine, const SchedulerConfig& config) const {
  std::vector<double> ttft, tpot, e2e, queue;
  std::int64_t measured = 0, within_slo = 0;
  // The measured requests' gaps, counted per distinct value.
  const InterTokenGaps& gaps = engine.inter_token_gaps();
  std::vector<std::uint64_t> itl_counts(gaps.distinct(), 0);
  const auto meets_slo = [&](const RequestLatency& l) {
    return (!config.slo_ttft_ms || l.ttft_ms <= *config.slo_ttft_ms) &&
           (!config.slo_tpot_ms || !l.has_tpot || l.tpot_ms <= *config.slo_tpot_ms);
  };
  for (const Request& r : engine.requests()) {
    if (r.spec.id < warmup_) continue;
    const RequestLatency l = request_latency(r);
    ++measured;
    within_slo += meets_slo(l);
    ttft.push_back(l.ttft_ms);
    e2e.push_back(l.e2e_ms);
    queue.push_back(l.queue_delay_ms);
    if (l.has_tpot) tpot.push_back(l.tpot_ms);
    for (const InterTokenGaps::Id id : r.itl) ++itl_counts[id];
  }
  const MeasurementWindow w = MeasurementWindow::of(engine.requests(), warmup_);
  const Tick t0 = w.start, t1 = w.end;
  const double window = seconds(t1 - t0);
  std::int64_t out_tokens = 0, in_tokens = 0, done = 0, good = 0;
  const double from_ms = ticks_to_ms(t0), to_ms = ticks_to_ms(t1);
  for (const Request& r : engine.requests()) {
    // A request whose first and last tokens both came out inside the window counts whole, from
    // their ticks. Summing its gaps in milliseconds can put its last token a rounding error past
    // the window's end, and the window ends at the last completion, where a closed-loop run's
    // requests finish together: such runs lost a token per request from their throughput.
    if (r.first_token > t0 && r.last_token <= t1) {  // t0 >= 0: a request with no token straddles
      out_tokens += 1 + static_cast<std::int64_t>(r.itl.size());
      in_tokens += r.spec.prompt_tokens;
    } else {
      // Straddling the window: token i came out at its first token plus its first i gaps.
      double at_ms = ticks_to_ms(r.first_token);
      if (at_ms > from_ms && at_ms <= to_ms) {
        ++out_tokens;
        in_tokens += r.spec.prompt_tokens;
      }
      for (const InterTokenGaps::Id id : r.itl) {
        at_ms += gaps.value(id);
        if (at_ms > from_ms && at_ms <= to_ms) ++out_tokens;
      }
    }
    if (r.finished <= t0 || r.finished > t1) continue;
    ++done;
    const RequestLatency l = request_latency(r);
    if (meets_slo(l)) ++good;
  }
  const auto per_s = [&](double v) { return window > 0 ? v / window : 0.0; };
  nlohmann::json m;
  m["ttft_ms"] = distribution_summary(std::move(ttft), true);
  m["itl_ms"] = distribution_summary(gaps.ascending(itl_counts), true);
  m["tpot_ms"] = distribution_summary(std::move(tpot), true);
  m["e2e_ms"] = distribution_summary(std::move(e2e), true);
  m["queue_delay_ms"] = distribution_summary(std::move(queue), true);
  m["throughput_tokens_per_s"] = per_s(static_cast<double>(out_tokens));
  m["input_throughput_tokens_per_s"] = per_s(static_cast<double>(in_tokens));
  m["requests_completed"] = measured;
  m["request_rate_per_s"] = per_s(static_cast<double>(done));
  // What arrived: measured requests over the span of their arrivals (n − 1 gaps).
  m["offered_rate_per_s"] =
      measured > 1 && w.last_arrival > w.first_arrival
          ? static_cast<double>(measured - 1) / seconds(w.last_arrival - w.first_arrival)
          : 0.0;
  if (config.slo_ttft_ms || config.slo_tpot_ms) {
    m["goodput_requests_per_s"] = per_s(static_cast<double>(good));
    // Of every measured request, wherever it finished: goodput's window leaves out the requests
    // an overloaded system finishes after the last arrival, which are the ones that missed.
    m["slo_attainment"] = measured > 0 ? static_cast<double>(within_slo) / static_cast<double>(measured) : 0.0;
  }
  // Per MoE layer of every step (GRACE-MoE §5's "MoE layer time" and all-to-all time).
  m["layer_latency_ms"] = distribution_summary(moe_layer_ms_, true);
  m["alltoall_ms"] = alltoall_ms_.mean();
  m["preemptions"] = engine.preemptions();
  m["kv_cache_peak_fraction"] = engine.kv_cache_peak_fraction();
  m["measurement_window_s"] = window;
  m["measurement_window"] = w.to_json();
  m["steady_state"] = w.steady;
  m["measured_arrival_span_s"] = seconds(w.last_arrival - w.first_arrival);
  // vLLM's benchmark_serving definition, beside ours: the measured requests' output tokens over
  // first arrival to last completion. Above capacity it counts the drain after the last arrival,
  // when the batch empties, so it falls below the rate the deployment sustains.
  m["benchmark_throughput_tokens_per_s"] =
      w.last_finish > w.start ? static_cast<double>(w.measured_output_tokens) / seconds(w.last_finish - w.start) : 0.0;
  return m;
}

void ServingMetrics::add_execution_summary(nlohmann::json& m, const ServingOutcome& engine) const {
  // Per GPU, over the whole run (warm-up included): busy is computing or copying.
  const Tick makespan = engine.now();
  std::vector<GpuTime> per_gpu = gpu_time_;
  if (unstepped_time_) {
    GpuTimeSweep sweep = *unstepped_time_;  // summary() is const; the sweep finishes on a copy
    const std::vector<GpuTime> t = sweep.finish(makespan);
    for (std::size_t g = 0; g < per_gpu.size(); ++g) {
      GpuTime busy = t[g];
      busy.waiting = 0;
      per_gpu[g] += busy;
    }
  }
  std::vector<double> idle;
  for (GpuTime& t : per_gpu) {
    t.waiting = std::max<Tick>(0, makespan - (t.compute + t.copy + t.communication + t.scheduling));
    idle.push_back(makespan > 0 ? 1.0 - static_cast<double>(t.busy()) / static_cast<double>(makespan) : 0.0);
  }
  m["gpu_idle_fraction"] = {{"mean", mean_of(idle)}, {"per_gpu", idle}};
  m["gpu_time_breakdown"] = gpu_time_json(per_gpu, makespan);
  m["bytes"] = bytes_.to_json();
  m["load"] = load_.to_json();
  m["tokens_dropped"] = dropped_;
  m["steps"] = {{"count", steps_},
                {"step_ms", distribution_summary(step_ms_, true)},
                {"decode_only_step_ms", distribution_summary(decode_step_ms_, true)},
                {"prefill_tokens", prefill_tokens_},
                {"decode_tokens", decode_tokens_}};
  m["makespan_ms"] = ticks_to_ms(makespan);
}

nlohmann::json ServingMetrics::summary(const ServingOutcome& engine, const SchedulerConfig& config) const {
  nlohmann::json m = request_summary(engine, config);
  add_execution_summary(m, engine);
  return m;
}

void check_metric_set(const nlohmann::json& metrics) {
  static const std::set<std::string> common{
      "ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "queue_delay_ms", "throughput_tokens_per_s",
      "input_throughput_tokens_per_s", "requests_completed", "request_rate_per_s", "offered_rate_per_s",
      "layer_latency_ms", "alltoall_ms", "preemptions", "kv_cache_peak_fraction", "measurement_window_s",
      "measurement_window", "steady_state", "measured_arrival_span_s", "benchmark_throughput_tokens_per_s",
      "gpu_idle_fraction", "gpu_time_breakdown", "bytes", "load", "tokens_dropped", "steps", "makespan_ms", "events",
      "pools"};
  static const std::set<std::string> with_slo{"goodput_requests_per_s", "slo_attainment"};
  std::set<std::string> missing = common, unexpected;
  const bool slo = metrics.contains("slo_attainment");
  if (slo) missing.insert(with_slo.begin(), with_slo.end());
  for (const auto& [key, value] : metrics.items())
    if (missing.erase(key) == 0) unexpected.insert(key);
  check_invariant(missing.empty() && unexpected.empty(), Invariant::kMetricSet, [&] {
    std::string text = "the serving engine's metrics";
    for (const auto& k : missing) text += ", missing " + k;
    for (const auto& k : unexpected) text += ", unexpected " + k;
    return text;
  });
}

void add_steady_state_warning(nlohmann::json& run) {
  const nlohmann::json& m = run["metrics"];
  if (m.value("steady_state", true)) return;
  const nlohmann::json& w = m["measurement_window"];
  std::ostringstream text;
  text << std::fixed;
  text.precision(2);
  text << "the run never reached a steady state: while its measured requests arrived ("
       << m["offered_rate_per_s"].get<double>() << " requests/s over " << m["measured_arrival_span_s"].get<double>()
       << " s) it completed " << 100.0 * w["served_fraction"].get<double>() << "% as many, and "
       << w["backlog_at_last_arrival"].get<std::int64_t>() << " were still waiting for their first token when the last "
       << "arrived; the load exceeds what the deployment sustains, or the run is shorter than a request's life "
          "(add warm-up requests), so rates are measured from the first arrival to the last completion "
          "(metrics.measurement_window)";
  run["warnings"].push_back(text.str());
}

std::string requests_csv_header() {
  return "run,id,warmup,arrived_s,prompt_tokens,output_tokens,pool,gpu,first_scheduled_s,first_token_s,finished_s,"
         "queue_delay_ms,ttft_ms,tpot_ms,e2e_ms,itl_max_ms,preemptions\n";
}

void write_requests_csv(std::ostream& out, const std::string& label, const std::vector<Request>& requests,
                        std::int64_t warmup_requests) {
  // One row per request (18,432 a step at EP72 decode): formatted with std::to_chars into one
  // buffer, whose "%.9g" is the ostream's precision(9) text, character for character.
  std::string row;
  char text[32];
  const auto put = [&](auto v) {
    std::to_chars_result r;
    if constexpr (std::is_floating_point_v<decltype(v)>)
      r = std::to_chars(text, text + sizeof text, v, std::chars_format::general, 9);
    else
      r = std::to_chars(text, text + sizeof text, v);
    row.append(text, r.ptr);
    row.push_back(',');
  };
  for (const Request& r : requests) {
    const RequestLatency l = request_latency(r);
    row.assign(label);
    row.push_back(',');
    put(r.spec.id);
    put(r.spec.id < warmup_requests ? 1 : 0);
    put(seconds(r.arrived));
    put(r.spec.prompt_tokens);
    put(r.spec.output_tokens);
    put(r.pool);
    put(r.gpu);
    put(seconds(r.first_scheduled));
    put(seconds(r.first_token));
    put(seconds(r.finished));
    put(l.queue_delay_ms);
    put(l.ttft_ms);
    put(l.tpot_ms);
    put(l.e2e_ms);
    put(r.itl_max_ms);
    put(r.preemptions);
    row.back() = '\n';
    out.write(row.data(), static_cast<std::streamsize>(row.size()));
  }
}

}  // namespace moesim
