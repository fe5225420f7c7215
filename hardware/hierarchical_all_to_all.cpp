#include "hardware/hierarchical_all_to_all.hpp"

#include <algorithm>
#include <stdexcept>

#include "hardware/collectives.hpp"

namespace moesim {

TokenDispatchRows::TokenDispatchRows(const Cluster& cluster, bool node_level)
    : cluster_(cluster),
      node_level_(node_level),
      first_(static_cast<std::size_t>(cluster.num_gpus()), std::vector<std::int64_t>(static_cast<std::size_t>(cluster.num_gpus()), 0)),
      second_(first_) {}

void TokenDispatchRows::add_token(int home, std::span<const int> dests) {
  seen_.clear();
  for (const int g : dests)
    if (std::find(seen_.begin(), seen_.end(), g) == seen_.end()) seen_.push_back(g);
  const int home_node = cluster_.node_of_gpu(home);
  const auto h = static_cast<std::size_t>(home);
  for (std::size_t i = 0; i < seen_.size(); ++i) {
    const int g = seen_[i];
    const int node = cluster_.node_of_gpu(g);
    if (!node_level_ || node == home_node) {
      ++first_[h][static_cast<std::size_t>(g)];
      continue;
    }
    // The gateway is the token's first destination on this node; later ones are forwarded by it.
    const auto gw = std::find_if(seen_.begin(), seen_.begin() + static_cast<std::ptrdiff_t>(i),
                                 [&](int o) { return cluster_.node_of_gpu(o) == node; });
    if (gw == seen_.begin() + static_cast<std::ptrdiff_t>(i)) {
      ++first_[h][static_cast<std::size_t>(g)];
    } else {
      ++second_[static_cast<std::size_t>(*gw)][static_cast<std::size_t>(g)];
      ++forwarded_;
    }
  }
}

std::vector<TaskId> add_staged_all_to_all(TaskGraph& g, const Cluster& c, const std::vector<int>& gpus,
                                          std::span<const std::vector<std::vector<double>>> stages, Phase phase,
                                          int layer, const std::vector<TaskId>& start) {
  if (stages.empty()) throw std::logic_error("add_staged_all_to_all: no stage");
  std::vector<TaskId> done = start;
  for (const auto& bytes : stages) done = add_all_to_all(g, c, gpus, bytes, phase, layer, done);
  return done;
}

}  // namespace moesim
