#include "app/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace moesim {

nlohmann::json distribution_summary(std::vector<double> v) {
  nlohmann::json j;
  if (v.empty()) {
    j["mean"] = 0.0;
    j["p50"] = 0.0;
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
  j["p99"] = rank(0.99);
  return j;
}

MetricsCollector::MetricsCollector(const Cluster& cluster)
    : cluster_(cluster), busy_(cluster.num_gpus(), 0), memory_(cluster.num_gpus(), 0.0) {}

void MetricsCollector::add_batch(const BatchPlan& plan, const std::vector<TaskTiming>& timing, Tick start,
                                 const std::vector<double>& skewness, std::int64_t tokens) {
  const TaskGraph& g = plan.graph;
  const int G = cluster_.num_gpus();
  Tick end = start;
  int layers = 0;
  for (const auto& t : g.tasks()) layers = std::max(layers, t.layer + 1);
  std::vector<Tick> layer_end(layers, start);
  std::vector<char> is_moe(layers, 0);
  std::vector<Tick> a2a_begin(layers * 2, kTickMax), a2a_end(layers * 2, 0);
  // Busy intervals per GPU (compute stream and copy engines), merged below to avoid double counts.
  std::vector<std::vector<std::pair<Tick, Tick>>> busy(G);

  for (TaskId id = 0; id < g.size(); ++id) {
    const Task& t = g.task(id);
    const TaskTiming& tm = timing[id];
    end = std::max(end, tm.end);
    if (t.layer >= 0) layer_end[t.layer] = std::max(layer_end[t.layer], tm.end);
    if (t.kind == TaskKind::kCompute) {
      if (tm.end > tm.start) busy[t.gpu].emplace_back(tm.start, tm.end);
      if (t.phase == Phase::kRouter) is_moe[t.layer] = 1;
    } else if (t.kind == TaskKind::kTransfer) {
      if (t.engine != CopyEngine::kNone && tm.end > tm.start) busy[t.gpu].emplace_back(tm.start, tm.end);
      const bool host = t.src >= G || t.dst >= G;
      if (t.src != t.dst) {
        if (host) bytes_h2d_ += t.bytes;
        else if (cluster_.node_of_endpoint(t.src) != cluster_.node_of_endpoint(t.dst)) bytes_inter_ += t.bytes;
        else bytes_intra_ += t.bytes;
      }
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
  for (int gpu = 0; gpu < G; ++gpu) {
    auto& iv = busy[gpu];
    std::sort(iv.begin(), iv.end());
    Tick cur_s = -1, cur_e = -1;
    for (const auto& [s, e] : iv) {
      if (s > cur_e) {
        if (cur_e > cur_s) busy_[gpu] += cur_e - cur_s;
        cur_s = s;
        cur_e = e;
      } else {
        cur_e = std::max(cur_e, e);
      }
    }
    if (cur_e > cur_s) busy_[gpu] += cur_e - cur_s;
  }
  for (const auto& moe : plan.moe) {
    dropped_ += moe.tokens_dropped;
    const double total = std::accumulate(moe.gpu_tokens.begin(), moe.gpu_tokens.end(), 0.0);
    const double mx = static_cast<double>(*std::max_element(moe.gpu_tokens.begin(), moe.gpu_tokens.end()));
    gpu_imbalance_.push_back(total > 0 ? mx / (total / static_cast<double>(moe.gpu_tokens.size())) : 1.0);
  }
  skewness_.insert(skewness_.end(), skewness.begin(), skewness.end());
  ttft_ms_.push_back(ticks_to_ms(end - start));
  total_time_ += end - start;
  tokens_ += tokens;
}

nlohmann::json MetricsCollector::summary() const {
  nlohmann::json m;
  const double secs = ticks_to_seconds(total_time_);
  m["layer_latency_ms"] = distribution_summary(layer_ms_);
  m["ttft_ms"] = distribution_summary(ttft_ms_);
  m["throughput_tokens_per_s"] = secs > 0 ? static_cast<double>(tokens_) / secs : 0.0;
  std::vector<double> idle;
  for (Tick b : busy_) idle.push_back(total_time_ > 0 ? 1.0 - static_cast<double>(b) / static_cast<double>(total_time_) : 0.0);
  m["gpu_idle_fraction"] = {{"mean", std::accumulate(idle.begin(), idle.end(), 0.0) / static_cast<double>(idle.size())},
                            {"per_gpu", idle}};
  m["alltoall_ms"] = distribution_summary(alltoall_ms_)["mean"];
  m["bytes"] = {{"intra_node", bytes_intra_}, {"inter_node", bytes_inter_}, {"host_to_device", bytes_h2d_}};
  auto mean = [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  };
  auto maxv = [](const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); };
  m["load"] = {{"skewness", mean(skewness_)},
               {"skewness_max", maxv(skewness_)},
               {"gpu_max_over_mean", mean(gpu_imbalance_)},
               {"gpu_max_over_mean_max", maxv(gpu_imbalance_)}};
  m["tokens_dropped"] = dropped_;
  m["tokens"] = tokens_;
  m["makespan_ms"] = ticks_to_ms(total_time_);
  m["memory_peak_bytes"] = {{"max", maxv(memory_)}, {"per_gpu", memory_}};
  return m;
}

}  // namespace moesim
