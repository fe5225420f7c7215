#include "policies/expert_copies.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "models/model_spec.hpp"
#include "policies/memory.hpp"

namespace moesim {

std::vector<std::pair<int, int>> new_hosts(const std::vector<std::vector<int>>& before,
                                           const std::vector<std::vector<int>>& after) {
  std::vector<std::pair<int, int>> added;
  for (std::size_t e = 0; e < after.size(); ++e) {
    std::vector<int> gpus = after[e];
    std::sort(gpus.begin(), gpus.end());
    gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
    for (const int g : gpus)
      if (std::find(before[e].begin(), before[e].end(), g) == before[e].end())
        added.emplace_back(static_cast<int>(e), g);
  }
  return added;
}

std::vector<WeightCopy> weight_copies(const std::vector<std::pair<int, int>>& added,
                                      const std::vector<std::vector<int>>& before,
                                      const std::vector<std::vector<int>>& after) {
  int gpus = 0;
  for (const auto& hosts : before)
    for (const int g : hosts) gpus = std::max(gpus, g + 1);
  std::vector<int> sent(static_cast<std::size_t>(gpus), 0);
  std::vector<WeightCopy> copies;
  for (const auto& [e, dst] : added) {
    int best = -1;
    bool best_keeps = false;
    for (const int s : before[e]) {
      if (s == dst) continue;
      const bool keeps = std::find(after[e].begin(), after[e].end(), s) != after[e].end();
      if (best < 0 || (keeps && !best_keeps) ||
          (keeps == best_keeps && (sent[s] < sent[best] || (sent[s] == sent[best] && s < best)))) {
        best = s;
        best_keeps = keeps;
      }
    }
    if (best < 0) throw std::logic_error("weight_copies: expert " + std::to_string(e) + " had no host to copy from");
    ++sent[best];
    copies.push_back(WeightCopy{e, best, dst});
  }
  return copies;
}

void StaticLayoutWithCopies::setup(const PolicyContext& ctx) {
  const int G = ctx.cluster.num_gpus();
  owner_ = static_owner(placement_name_, ctx.model.experts, G);
  placement_ = ExpertPlacement::from_owner(owner_, G);
  max_buffers_.assign(static_cast<std::size_t>(G), 0);
  headroom_ = memory_headroom(*this, ctx);  // with no copy buffers yet
}

std::vector<double> StaticLayoutWithCopies::expert_memory_bytes(const PolicyContext& ctx) const {
  const double eb = ctx.model.expert_bytes();
  std::vector<double> bytes(static_cast<std::size_t>(ctx.cluster.num_gpus()), 0.0);
  for (std::size_t g = 0; g < bytes.size() && g < placement_.experts_on_gpu.size(); ++g) {
    bytes[g] = static_cast<double>(placement_.experts_on_gpu[g].size()) * eb * ctx.model.num_moe_layers();
    if (g < max_buffers_.size()) bytes[g] += max_buffers_[g] * eb;
  }
  return bytes;
}

void StaticLayoutWithCopies::note_copies(const std::vector<WeightCopy>& copies) {
  std::vector<int> per_gpu(max_buffers_.size(), 0);
  for (const WeightCopy& c : copies) ++per_gpu[static_cast<std::size_t>(c.dst_gpu)];
  for (std::size_t g = 0; g < per_gpu.size(); ++g) max_buffers_[g] = std::max(max_buffers_[g], per_gpu[g]);
}

}  // namespace moesim
