#include "app/run/metrics.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "app/run/sorted_values.hpp"

namespace moesim {

nlohmann::json distribution_summary(std::vector<double> v, bool with_p90) {
  nlohmann::json j;
  if (v.empty()) {
    j["mean"] = 0.0;
    j["p50"] = 0.0;
    if (with_p90) j["p90"] = 0.0;
    j["p99"] = 0.0;
    return j;
  }
  sort_values(v);
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

nlohmann::json distribution_summary(const std::vector<std::pair<double, std::uint64_t>>& ascending, bool with_p90) {
  std::uint64_t n = 0;
  for (const auto& [value, count] : ascending) n += count;
  if (n == 0) return distribution_summary(std::vector<double>{}, with_p90);
  // The value at 0-based position `at` of the sorted sample.
  const auto at = [&](std::uint64_t at) {
    for (const auto& [value, count] : ascending) {
      if (at < count) return value;
      at -= count;
    }
    return ascending.back().first;
  };
  const auto rank = [&](double q) {
    const auto idx = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(n)));
    return at(std::min(n - 1, idx == 0 ? 0 : idx - 1));
  };
  // Added one by one in ascending order, as std::accumulate adds the sorted sample.
  double sum = 0.0;
  for (const auto& [value, count] : ascending)
    for (std::uint64_t i = 0; i < count; ++i) sum += value;
  nlohmann::json j;
  j["mean"] = sum / static_cast<double>(n);
  j["p50"] = rank(0.50);
  if (with_p90) j["p90"] = rank(0.90);
  j["p99"] = rank(0.99);
  return j;
}

double mean_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}
double max_of(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); }

namespace {

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

double gpu_load_std(const std::vector<std::int64_t>& gpu_tokens) {
  const double n = static_cast<double>(gpu_tokens.size());
  const double mean = std::accumulate(gpu_tokens.begin(), gpu_tokens.end(), 0.0) / n;
  double var = 0.0;
  for (const std::int64_t t : gpu_tokens) var += (static_cast<double>(t) - mean) * (static_cast<double>(t) - mean);
  return std::sqrt(var / n);
}

double LoadStats::add_layer(const std::vector<std::int64_t>& gpu_tokens, bool count_empty) {
  const double total = std::accumulate(gpu_tokens.begin(), gpu_tokens.end(), 0.0);
  if (total <= 0 && !count_empty) return std::numeric_limits<double>::quiet_NaN();
  const double mx = static_cast<double>(*std::max_element(gpu_tokens.begin(), gpu_tokens.end()));
  const double imbalance = total > 0 ? mx / (total / static_cast<double>(gpu_tokens.size())) : 1.0;
  gpu_imbalance.add(imbalance);
  gpu_load_std.add(moesim::gpu_load_std(gpu_tokens));
  return imbalance;
}

nlohmann::json LoadStats::to_json() const {
  return {{"skewness", skewness.mean()},
          {"skewness_max", skewness.max()},
          {"gpu_max_over_mean", gpu_imbalance.mean()},
          {"gpu_max_over_mean_max", gpu_imbalance.max()},
          {"gpu_load_std", gpu_load_std.mean()}};
}

MetricsCollector::MetricsCollector(const Cluster& cluster)
    : cluster_(cluster), gpu_time_(cluster.num_gpus()), memory_(cluster.num_gpus(), 0.0) {}

void MetricsCollector::add_batch(int batch, const BatchRecorder& observed, const std::vector<MoeLayerOutput>& moe,
                                 const std::vector<double>& skewness, std::int64_t tokens,
                                 const std::vector<Forecast>& forecasts) {
  const std::size_t first_layer = layer_ms_.size(), first_forecast = error_.size();
  const Tick start = observed.start(), end = observed.end();
  layer_ms_.insert(layer_ms_.end(), observed.layer_ms().begin(), observed.layer_ms().end());
  alltoall_ms_.insert(alltoall_ms_.end(), observed.alltoall_ms().begin(), observed.alltoall_ms().end());
  layer_parts_.insert(layer_parts_.end(), observed.layer_parts().begin(), observed.layer_parts().end());
  for (std::size_t gpu = 0; gpu < gpu_time_.size(); ++gpu) gpu_time_[gpu] += observed.gpu_time()[gpu];

  BatchMetrics b;
  std::vector<double> imbalance;  // this batch's layers (a prefill layer always counts)
  for (const auto& layer : moe) {
    b.tokens_dropped += layer.tokens_dropped;
    bytes_.intra_gpu += layer.local_bytes;
    imbalance.push_back(load_.add_layer(layer.gpu_tokens, true));
  }
  for (const double v : skewness) load_.skewness.add(v);
  for (const Forecast& f : forecasts) {
    overhead_ms_.push_back(f.overhead_ms);
    error_.push_back(f.error);
  }
  b.batch = batch;
  b.start = start;
  b.duration = end - start;
  b.ttft = observed.ttft_end() - start;
  b.tokens = tokens;
  b.layer_latency_ms = mean_since(layer_ms_, first_layer);
  b.alltoall_ms = mean_since(alltoall_ms_, first_layer);
  b.skewness = mean_of(skewness);
  b.gpu_max_over_mean = mean_of(imbalance);
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
  m["load"] = load_.to_json();
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
