#include "policies/grace/replication.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace moesim {

int replica_count(double rho, int gpus) {
  if (gpus < 2) return 0;
  return std::min(std::max(1, static_cast<int>(std::floor(rho))), gpus - 1);
}

ReplicationPlan plan_replication(const std::vector<double>& expert_load, const std::vector<int>& gpu_of_expert, int gpus,
                                 bool fixed) {
  if (expert_load.size() != gpu_of_expert.size()) throw std::invalid_argument("plan_replication: one GPU per expert");
  std::vector<double> load(static_cast<std::size_t>(gpus), 0.0);
  for (std::size_t e = 0; e < expert_load.size(); ++e) load[static_cast<std::size_t>(gpu_of_expert[e])] += expert_load[e];
  ReplicationPlan p;
  p.predicted_load = load;
  const double total = std::accumulate(load.begin(), load.end(), 0.0);
  if (gpus < 2 || total <= 0.0) return p;
  p.heaviest_gpu = static_cast<int>(std::max_element(load.begin(), load.end()) - load.begin());
  const double w_max = load[static_cast<std::size_t>(p.heaviest_gpu)];
  const double rho = w_max / (total / gpus);
  p.replicas = fixed ? 1 : replica_count(rho, gpus);
  // Hot experts: the heaviest group's experts by load until their cumulative load reaches
  // W_max · n/(1 + n).
  std::vector<int> group;
  for (std::size_t e = 0; e < expert_load.size(); ++e)
    if (gpu_of_expert[e] == p.heaviest_gpu) group.push_back(static_cast<int>(e));
  std::stable_sort(group.begin(), group.end(), [&](int a, int b) {
    return expert_load[static_cast<std::size_t>(a)] > expert_load[static_cast<std::size_t>(b)];
  });
  const double bar = w_max * p.replicas / (1.0 + p.replicas);
  double w_r = 0.0;
  for (const int e : group) {
    if (w_r >= bar) break;
    p.hot_experts.push_back(e);
    w_r += expert_load[static_cast<std::size_t>(e)];
  }
  // The n least loaded other GPUs (lowest index on ties).
  std::vector<int> others;
  for (int g = 0; g < gpus; ++g)
    if (g != p.heaviest_gpu) others.push_back(g);
  std::stable_sort(others.begin(), others.end(), [&](int a, int b) { return load[static_cast<std::size_t>(a)] < load[static_cast<std::size_t>(b)]; });
  p.target_gpus.assign(others.begin(), others.begin() + p.replicas);
  // Eq. 3.
  const double w_p = w_r / (p.replicas + 1);
  p.predicted_load[static_cast<std::size_t>(p.heaviest_gpu)] = w_max - w_r + w_p;
  for (const int g : p.target_gpus) p.predicted_load[static_cast<std::size_t>(g)] += w_p;
  return p;
}

int choose_by_polling_weight(const std::map<int, double>& weights, Rng& rng) {
  if (weights.empty()) throw std::invalid_argument("choose_by_polling_weight: no replica");
  double total = 0.0;
  for (const auto& [g, w] : weights) {
    if (!(w > 0.0)) throw std::invalid_argument("choose_by_polling_weight: weights must be positive");
    total += w;
  }
  double u = rng.uniform01() * total;
  for (const auto& [g, w] : weights) {
    u -= w;
    if (u < 0.0) return g;
  }
  return weights.rbegin()->first;
}

int topology_aware_route(const std::map<int, double>& weights, int token_gpu, const std::vector<int>& node_of_gpu,
                         Rng& rng) {
  if (weights.count(token_gpu)) return token_gpu;  // lines 1, 3-4
  std::map<int, double> local;                     // lines 2, 5-7
  for (const auto& [g, w] : weights)
    if (node_of_gpu[static_cast<std::size_t>(g)] == node_of_gpu[static_cast<std::size_t>(token_gpu)]) local.emplace(g, w);
  return choose_by_polling_weight(local.empty() ? weights : local, rng);  // lines 8-9
}

}  // namespace moesim
