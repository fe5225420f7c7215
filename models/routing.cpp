// Routing primitives: per-expert counts and skewness, inclusion probabilities for top-k without
// replacement, and systematic (Madow) sampling that realises them exactly and fast.
#include "models/routing.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace moesim {

std::vector<std::int64_t> LayerRouting::expert_counts() const {
  std::vector<std::int64_t> out(static_cast<std::size_t>(num_experts), 0);
  if (by_count) {
    const auto E = static_cast<std::size_t>(num_experts);
    for (std::size_t row = 0; row + E <= counts.size(); row += E)
      for (std::size_t e = 0; e < E; ++e) out[e] += counts[row + e];
    return out;
  }
  for (const std::int32_t e : experts) ++out[static_cast<std::size_t>(e)];
  return out;
}

double LayerRouting::skewness() const {
  // MoE-GPS §2: tokens on the most popular expert over the mean tokens per expert.
  if (num_tokens <= 0 || num_experts <= 0) return 0.0;  // nothing routed: no imbalance to report
  const auto counts = expert_counts();
  const double mean = static_cast<double>(num_tokens) * top_k / num_experts;
  return static_cast<double>(*std::max_element(counts.begin(), counts.end())) / mean;
}

std::vector<double> inclusion_probabilities(const std::vector<double>& p, int top_k) {
  const std::size_t n = p.size();
  if (top_k < 1 || static_cast<std::size_t>(top_k) > n)
    throw std::invalid_argument("inclusion_probabilities: top_k " + std::to_string(top_k) +
                                " not in [1, " + std::to_string(n) + "]");
  for (const double v : p)
    if (!(v >= 0.0)) throw std::invalid_argument("inclusion_probabilities: negative or NaN share");

  // pi_i = k·p_i, but a token selects an expert at most once, so pi_i <= 1. The mass above 1
  // goes to the uncapped experts in proportion to p (evenly if they all have p = 0, which only
  // happens when fewer than k experts have any share). Capping can push others over 1, so
  // repeat until no new expert is capped; at most n rounds.
  std::vector<double> pi(n, 0.0);
  std::vector<char> capped(n, 0);
  double budget = static_cast<double>(top_k);  // mass still to give to uncapped experts
  for (std::size_t round = 0; round <= n; ++round) {
    double free_share = 0.0;
    std::size_t free_count = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (!capped[i]) free_share += p[i], ++free_count;
    bool changed = false;
    for (std::size_t i = 0; i < n; ++i) {
      if (capped[i]) continue;
      pi[i] = free_share > 0.0 ? budget * p[i] / free_share : budget / static_cast<double>(free_count);
      if (pi[i] > 1.0) {
        pi[i] = 1.0;
        capped[i] = 1;
        changed = true;
      }
    }
    if (!changed) break;
    budget = static_cast<double>(top_k) - static_cast<double>(std::count(capped.begin(), capped.end(), 1));
  }
  return pi;
}

LayerRouting systematic_sample(const std::vector<double>& pi, int top_k, std::int64_t tokens, Rng& rng) {
  const int n = static_cast<int>(pi.size());
  if (top_k < 1 || top_k > n) throw std::invalid_argument("systematic_sample: bad top_k");
  LayerRouting r;
  r.num_tokens = tokens;
  r.top_k = top_k;
  r.num_experts = n;
  r.experts.resize(static_cast<std::size_t>(tokens * top_k));

  // Systematic sampling pairs experts that are neighbours in the cumulative order (with top-2
  // over 8 uniform experts, only 4 pairs could ever occur). So the order is reshuffled
  // (Fisher–Yates) every kBlock tokens: co-selection varies while the cost stays
  // O(T·k·log E + T·E/kBlock), and marginals stay exact since each u is independent of the order.
  constexpr std::int64_t kBlock = 256;
  std::vector<std::int32_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> cum(static_cast<std::size_t>(n) + 1, 0.0);
  const auto reshuffle = [&] {
    for (int i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(static_cast<std::uint64_t>(i) + 1)]);
    // cum[j] = pi summed over the first j experts in `order`, pinned to exactly k at the end.
    for (int j = 0; j < n; ++j) cum[j + 1] = cum[j] + pi[order[j]];
    const double total = cum[n];
    if (!(total > 0.0)) throw std::invalid_argument("systematic_sample: all inclusion probabilities are zero");
    for (double& c : cum) c *= static_cast<double>(top_k) / total;
    cum[n] = static_cast<double>(top_k);
  };

  // Points u, u+1, ..., u+k-1 land in k intervals of length pi_i <= 1, hence k distinct experts,
  // and P(i selected) = pi_i exactly (Madow 1949). Rounding could in principle put two points in
  // one interval of length 1+eps, so indices are forced strictly increasing, skipping empty
  // (pi = 0) intervals, and kept low enough that the remaining points still fit.
  for (std::int64_t t = 0; t < tokens; ++t) {
    if (t % kBlock == 0) reshuffle();
    const double u = rng.uniform01();
    int prev = -1;
    std::int32_t* out = &r.experts[static_cast<std::size_t>(t * top_k)];
    for (int s = 0; s < top_k; ++s) {
      const double x = u + s;
      int j = static_cast<int>(std::upper_bound(cum.begin() + 1 + std::max(prev, 0), cum.end(), x) -
                               (cum.begin() + 1));
      if (j <= prev) {
        j = prev + 1;
        while (j < n - (top_k - s) && cum[j + 1] == cum[j]) ++j;
      }
      j = std::min(j, n - (top_k - s));
      out[s] = order[j];
      prev = j;
    }
  }
  return r;
}

LayerRouting RoutingModel::route(int batch, int moe_layer, std::int64_t tokens, Rng& rng) const {
  const std::vector<double> p = distribution(batch, moe_layer, rng);
  if (static_cast<int>(p.size()) != ctx_.experts)
    throw std::logic_error("routing model returned " + std::to_string(p.size()) + " shares for " +
                           std::to_string(ctx_.experts) + " experts");
  return systematic_sample(inclusion_probabilities(p, ctx_.top_k), ctx_.top_k, tokens, rng);
}

TableRoutingModel::TableRoutingModel(RoutingContext ctx, std::vector<std::vector<double>> rows)
    : RoutingModel(std::move(ctx)), rows_(std::move(rows)) {
  if (rows_.empty()) throw std::invalid_argument("TableRoutingModel: no distribution");
  for (auto& row : rows_) {
    const double sum = std::accumulate(row.begin(), row.end(), 0.0);
    if (!(sum > 0.0)) throw std::invalid_argument("TableRoutingModel: a distribution sums to zero");
    for (double& v : row) v /= sum;
  }
}

std::vector<double> TableRoutingModel::distribution(int /*batch*/, int moe_layer, Rng& /*rng*/) const {
  const std::size_t n = rows_.size();
  return rows_[static_cast<std::size_t>(moe_layer < 0 ? 0 : moe_layer) % n];
}

}  // namespace moesim
