#include "app/metrics.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <utility>

#include "sim/chrome_trace.hpp"

namespace moesim {

namespace {

// Breakdown classes in precedence order; waiting is whatever no class claims.
enum Class { kComputeClass, kCopyClass, kCommunicationClass, kSchedulingClass, kClasses };
constexpr std::array<const char*, kClasses + 1> kClassNames = {"compute", "copy", "communication", "scheduling",
                                                               "waiting"};

Class class_of(GpuActivity a) {
  switch (a) {
    case GpuActivity::kCompute: return kComputeClass;
    case GpuActivity::kCopy: return kCopyClass;
    case GpuActivity::kSend:
    case GpuActivity::kReceive: return kCommunicationClass;
    case GpuActivity::kSchedule: return kSchedulingClass;
  }
  return kSchedulingClass;
}

// The field of class `c` (waiting for c == kClasses), const or not as `t` is.
template <class T>
auto& slot(T& t, int c) {
  switch (c) {
    case kComputeClass: return t.compute;
    case kCopyClass: return t.copy;
    case kCommunicationClass: return t.communication;
    case kSchedulingClass: return t.scheduling;
    default: return t.waiting;
  }
}

struct Edge {
  Tick at;
  int cls;
  int delta;  ///< +1 an activity of class `cls` begins, -1 one ends
};

}  // namespace

GpuTime& GpuTime::operator+=(const GpuTime& o) {
  for (int c = 0; c <= kClasses; ++c) slot(*this, c) += slot(o, c);
  return *this;
}

std::vector<GpuTime> gpu_time_breakdown(const TaskGraph& plan, const std::vector<TaskTiming>& timing,
                                        int num_gpus, Tick start, Tick end) {
  std::vector<std::vector<Edge>> edges(static_cast<std::size_t>(num_gpus));
  for (TaskId id = 0; id < plan.size(); ++id) {
    const Tick s = std::max(timing[id].start, start), e = std::min(timing[id].end, end);
    if (e <= s) continue;
    for (const GpuUse& use : gpu_uses(plan.task(id), num_gpus)) {
      auto& ev = edges[static_cast<std::size_t>(use.gpu)];
      ev.push_back({s, class_of(use.activity), +1});
      ev.push_back({e, class_of(use.activity), -1});
    }
  }
  std::vector<GpuTime> out(static_cast<std::size_t>(num_gpus));
  for (int g = 0; g < num_gpus; ++g) {
    auto& ev = edges[static_cast<std::size_t>(g)];
    std::sort(ev.begin(), ev.end(), [](const Edge& a, const Edge& b) { return a.at < b.at; });
    // Sweep: each stretch between consecutive edges goes to the highest-precedence active class.
    std::array<int, kClasses> active{};
    Tick prev = start;
    GpuTime& t = out[static_cast<std::size_t>(g)];
    for (std::size_t i = 0; i < ev.size();) {
      const Tick at = ev[i].at;
      const auto top = std::find_if(active.begin(), active.end(), [](int n) { return n > 0; });
      if (top != active.end()) slot(t, static_cast<int>(top - active.begin())) += at - prev;
      for (; i < ev.size() && ev[i].at == at; ++i) active[static_cast<std::size_t>(ev[i].cls)] += ev[i].delta;
      prev = at;
    }
    t.waiting = std::max<Tick>(0, end - start) - (t.compute + t.copy + t.communication + t.scheduling);
  }
  return out;
}

nlohmann::json gpu_time_json(const std::vector<GpuTime>& per_gpu, Tick makespan) {
  nlohmann::json gpus = nlohmann::json::array();
  std::array<double, kClasses + 1> fraction{};
  for (const GpuTime& t : per_gpu) {
    nlohmann::json g;
    for (int c = 0; c <= kClasses; ++c) {
      g[kClassNames[static_cast<std::size_t>(c)]] = ticks_to_ms(slot(t, c));
      if (makespan > 0)
        fraction[static_cast<std::size_t>(c)] += static_cast<double>(slot(t, c)) / static_cast<double>(makespan);
    }
    gpus.push_back(std::move(g));
  }
  nlohmann::json mean;
  for (int c = 0; c <= kClasses; ++c)
    mean[kClassNames[static_cast<std::size_t>(c)]] =
        per_gpu.empty() ? 0.0 : fraction[static_cast<std::size_t>(c)] / static_cast<double>(per_gpu.size());
  return {{"per_gpu_ms", gpus}, {"mean_fraction", mean}};
}

nlohmann::json distribution_summary(std::vector<double> v, bool with_p90) {
  nlohmann::json j;
  if (v.empty()) {
    j["mean"] = 0.0;
    j["p50"] = 0.0;
    if (with_p90) j["p90"] = 0.0;
    j["p99"] = 0.0;
    return j;
  }
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {
    const auto idx = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, idx == 0 ? 0 : idx - 1)];
  };
  j["mean"] = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  j["p50"] = rank(0.50);
  if (with_p90) j["p90"] = rank(0.90);
  j["p99"] = rank(0.99);
  return j;
}

namespace {

double mean_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}
double max_of(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); }

// The mean of the values appended to `all` since it had `from` elements: one batch's layers.
double mean_since(const std::vector<double>& all, std::size_t from) {
  return mean_of(std::vector<double>(all.begin() + static_cast<std::ptrdiff_t>(from), all.end()));
}

// Per-batch throughput statistics. HarMoEny §V-B reports the population variance across batches
// in tokens²/s² (Fig. 8) and §III the largest drop between two consecutive batches (Fig. 4b).
void throughput_stats(const std::vector<BatchMetrics>& batches, nlohmann::json& m) {
  std::vector<double> thr;
  for (const auto& b : batches) thr.push_back(b.throughput_tokens_per_s());
  const double mean = mean_of(thr);
  double var = 0.0, drop = 0.0;
  for (const double x : thr) var += (x - mean) * (x - mean);
  for (std::size_t i = 1; i < thr.size(); ++i)
    if (thr[i - 1] > 0.0) drop = std::max(drop, (thr[i - 1] - thr[i]) / thr[i - 1]);
  m["throughput_tokens_per_s_variance"] = thr.empty() ? 0.0 : var / static_cast<double>(thr.size());
  m["throughput_tokens_per_s_per_batch"] = {{"mean", mean},
                                            {"min", thr.empty() ? 0.0 : *std::min_element(thr.begin(), thr.end())},
                                            {"max", max_of(thr)},
                                            {"max_drop_fraction", drop}};
}

}  // namespace

void TrafficBytes::add(const Task& t, const Cluster& cluster) {
  if (t.kind != TaskKind::kTransfer || t.src == t.dst) return;
  const int G = cluster.num_gpus();
  if (t.src >= G || t.dst >= G) host_to_device += t.bytes;
  else if (cluster.node_of_endpoint(t.src) != cluster.node_of_endpoint(t.dst)) inter_node += t.bytes;
  else intra_node += t.bytes;
}

nlohmann::json TrafficBytes::to_json() const {
  return {{"intra_node", intra_node}, {"inter_node", inter_node}, {"host_to_device", host_to_device}};
}

double BatchMetrics::throughput_tokens_per_s() const {
  const double secs = ticks_to_seconds(duration);
  return secs > 0 ? static_cast<double>(tokens) / secs : 0.0;
}

nlohmann::json BatchMetrics::to_json() const {
  return {{"batch", batch},
          {"start_ms", ticks_to_ms(start)},
          {"tokens", tokens},
          {"ttft_ms", ticks_to_ms(ttft)},
          {"throughput_tokens_per_s", throughput_tokens_per_s()},
          {"layer_latency_ms", layer_latency_ms},
          {"alltoall_ms", alltoall_ms},
          {"skewness", skewness},
          {"gpu_max_over_mean", gpu_max_over_mean},
          {"predictor_overhead_ms", predictor_overhead_ms},
          {"prediction_error", prediction_error},
          {"tokens_dropped", tokens_dropped}};
}

MetricsCollector::MetricsCollector(const Cluster& cluster)
    : cluster_(cluster), gpu_time_(cluster.num_gpus()), memory_(cluster.num_gpus(), 0.0) {}

void MetricsCollector::add_batch(int batch, const BatchPlan& plan, const std::vector<TaskTiming>& timing, Tick start,
                                 const std::vector<double>& skewness, std::int64_t tokens,
                                 const std::vector<Forecast>& forecasts) {
  const TaskGraph& g = plan.graph;
  const int G = cluster_.num_gpus();
  const std::size_t first_layer = layer_ms_.size(), first_imbalance = gpu_imbalance_.size(),
                    first_skew = skewness_.size(), first_forecast = error_.size();
  Tick end = start;
  int layers = 0;
  for (const auto& t : g.tasks()) layers = std::max(layers, t.layer + 1);
  std::vector<Tick> layer_end(layers, start);
  std::vector<char> is_moe(layers, 0);
  std::vector<Tick> a2a_begin(layers * 2, kTickMax), a2a_end(layers * 2, 0);

  for (TaskId id = 0; id < g.size(); ++id) {
    const Task& t = g.task(id);
    const TaskTiming& tm = timing[id];
    end = std::max(end, tm.end);
    if (t.layer >= 0) layer_end[t.layer] = std::max(layer_end[t.layer], tm.end);
    if (t.kind == TaskKind::kCompute) {
      if (t.phase == Phase::kRouter) is_moe[t.layer] = 1;
    } else if (t.kind == TaskKind::kTransfer) {
      bytes_.add(t, cluster_);
      if ((t.phase == Phase::kDispatch || t.phase == Phase::kCombine) && t.layer >= 0) {
        const int slot = t.layer * 2 + (t.phase == Phase::kCombine ? 1 : 0);
        a2a_begin[slot] = std::min(a2a_begin[slot], tm.start);
        a2a_end[slot] = std::max(a2a_end[slot], tm.end);
      }
    }
  }
  Tick prev = start;
  for (int l = 0; l < layers; ++l) {
    if (is_moe[l]) {
      layer_ms_.push_back(ticks_to_ms(layer_end[l] - prev));
      double a2a = 0.0;
      for (int k = 0; k < 2; ++k)
        if (a2a_end[l * 2 + k] > 0 && a2a_begin[l * 2 + k] != kTickMax)
          a2a += ticks_to_ms(a2a_end[l * 2 + k] - a2a_begin[l * 2 + k]);
      alltoall_ms_.push_back(a2a);
    }
    prev = std::max(prev, layer_end[l]);
  }
  for (const LayerBreakdown& parts : moe_layer_breakdown(g, timing, start)) layer_parts_.push_back(parts);
  const std::vector<GpuTime> gpu_time = gpu_time_breakdown(g, timing, G, start, end);
  for (int gpu = 0; gpu < G; ++gpu) gpu_time_[gpu] += gpu_time[gpu];

  BatchMetrics b;
  for (const auto& moe : plan.moe) {
    b.tokens_dropped += moe.tokens_dropped;
    const double total = std::accumulate(moe.gpu_tokens.begin(), moe.gpu_tokens.end(), 0.0);
    const double mx = static_cast<double>(*std::max_element(moe.gpu_tokens.begin(), moe.gpu_tokens.end()));
    gpu_imbalance_.push_back(total > 0 ? mx / (total / static_cast<double>(moe.gpu_tokens.size())) : 1.0);
  }
  skewness_.insert(skewness_.end(), skewness.begin(), skewness.end());
  for (const Forecast& f : forecasts) {
    overhead_ms_.push_back(f.overhead_ms);
    error_.push_back(f.error);
  }
  b.batch = batch;
  b.start = start;
  b.duration = end - start;
  b.ttft = (layers > 0 ? *std::max_element(layer_end.begin(), layer_end.end()) : end) - start;
  b.tokens = tokens;
  b.layer_latency_ms = mean_since(layer_ms_, first_layer);
  b.alltoall_ms = mean_since(alltoall_ms_, first_layer);
  b.skewness = mean_since(skewness_, first_skew);
  b.gpu_max_over_mean = mean_since(gpu_imbalance_, first_imbalance);
  b.predictor_overhead_ms = mean_since(overhead_ms_, first_forecast);
  b.prediction_error = mean_since(error_, first_forecast);
  batches_.push_back(b);
  dropped_ += b.tokens_dropped;
  total_time_ += b.duration;
  tokens_ += tokens;
}

nlohmann::json MetricsCollector::summary() const {
  nlohmann::json m;
  const double secs = ticks_to_seconds(total_time_);
  std::vector<double> ttft_ms;
  nlohmann::json per_batch = nlohmann::json::array();
  for (const auto& b : batches_) {
    ttft_ms.push_back(ticks_to_ms(b.ttft));
    per_batch.push_back(b.to_json());
  }
  m["layer_latency_ms"] = distribution_summary(layer_ms_);
  m["ttft_ms"] = distribution_summary(ttft_ms);
  // MoE-GPS Fig. 6: the mean MoE layer's latency by activity (the parts sum to its mean).
  LayerBreakdown parts;
  for (const LayerBreakdown& b : layer_parts_) {
    parts.attention += b.attention;
    parts.ffn += b.ffn;
    parts.communication += b.communication;
    parts.overhead += b.overhead;
    parts.idle += b.idle;
  }
  const double n = layer_parts_.empty() ? 1.0 : static_cast<double>(layer_parts_.size());
  m["layer_breakdown_ms"] = {{"attention", parts.attention / n}, {"ffn", parts.ffn / n},
                             {"communication", parts.communication / n}, {"overhead", parts.overhead / n},
                             {"idle", parts.idle / n}};
  m["throughput_tokens_per_s"] = secs > 0 ? static_cast<double>(tokens_) / secs : 0.0;
  throughput_stats(batches_, m);
  std::vector<double> idle;
  for (const GpuTime& t : gpu_time_)
    idle.push_back(total_time_ > 0 ? 1.0 - static_cast<double>(t.busy()) / static_cast<double>(total_time_) : 0.0);
  m["gpu_idle_fraction"] = {{"mean", mean_of(idle)}, {"per_gpu", idle}};
  m["gpu_time_breakdown"] = gpu_time_json(gpu_time_, total_time_);
  m["alltoall_ms"] = distribution_summary(alltoall_ms_)["mean"];
  m["bytes"] = bytes_.to_json();
  m["load"] = {{"skewness", mean_of(skewness_)},
               {"skewness_max", max_of(skewness_)},
               {"gpu_max_over_mean", mean_of(gpu_imbalance_)},
               {"gpu_max_over_mean_max", max_of(gpu_imbalance_)}};
  // Means over MoE layers (of every batch) of what the predictor said it cost and how wrong it
  // was; the cost is also in the latencies, as the delay before each layer's attention.
  m["predictor_overhead_ms"] = mean_of(overhead_ms_);
  m["prediction_error"] = mean_of(error_);
  m["tokens_dropped"] = dropped_;
  m["tokens"] = tokens_;
  m["makespan_ms"] = ticks_to_ms(total_time_);
  m["memory_peak_bytes"] = {{"max", max_of(memory_)}, {"per_gpu", memory_}};
  m["per_batch"] = std::move(per_batch);
  return m;
}

}  // namespace moesim
