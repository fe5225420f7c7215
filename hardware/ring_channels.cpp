#include "hardware/ring_channels.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace moesim {

std::vector<int> ring_order(const Cluster& cluster, const std::vector<int>& gpus) {
  if (gpus.empty()) return {};
  std::vector<int> ring{gpus.front()};
  std::vector<char> used(gpus.size(), 0);
  used[0] = 1;
  for (std::size_t step = 1; step < gpus.size(); ++step) {
    const int cur = ring.back();
    std::size_t best = gpus.size();
    double best_bw = -1.0;
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      if (used[i]) continue;
      const double bw = cluster.route_bandwidth_Bps(cluster.gpu_endpoint(cur), cluster.gpu_endpoint(gpus[i]));
      if (bw > best_bw) {
        best_bw = bw;
        best = i;
      }
    }
    used[best] = 1;
    ring.push_back(gpus[best]);
  }
  return ring;
}

namespace {

// Shares that minimise the busiest link's time per step (max over links of Σ shares of the rings
// crossing it / its bandwidth): multiplicative updates, from shares proportional to each ring's
// bottleneck, that move data off rings whose busiest link is above the worst link's average.
void balance_shares(const Cluster& cluster, std::vector<RingChannel>& rings) {
  if (rings.empty()) return;
  std::vector<std::vector<LinkId>> links(rings.size());
  std::vector<LinkId> path;
  for (std::size_t r = 0; r < rings.size(); ++r) {
    const auto& o = rings[r].order;
    for (std::size_t i = 0; i < o.size(); ++i) {
      cluster.route_into(cluster.gpu_endpoint(o[i]), cluster.gpu_endpoint(o[(i + 1) % o.size()]), path);
      links[r].insert(links[r].end(), path.begin(), path.end());
    }
  }
  double total = 0.0;
  for (const auto& ch : rings) total += ch.bottleneck_Bps;
  for (auto& ch : rings) ch.share = total > 0 ? ch.bottleneck_Bps / total : 1.0 / static_cast<double>(rings.size());
  if (rings.size() == 1) return;
  std::vector<double> load(cluster.links().size(), 0.0);
  for (int iter = 0; iter < 200; ++iter) {
    for (std::size_t r = 0; r < rings.size(); ++r)
      for (LinkId l : links[r]) load[l] = 0.0;
    for (std::size_t r = 0; r < rings.size(); ++r)
      for (LinkId l : links[r]) load[l] += rings[r].share / cluster.links()[l].bandwidth_Bps;
    double worst = 0.0;
    for (std::size_t r = 0; r < rings.size(); ++r)
      for (LinkId l : links[r]) worst = std::max(worst, load[l]);
    double sum = 0.0, moved = 0.0;
    for (std::size_t r = 0; r < rings.size(); ++r) {
      double mine = 0.0;
      for (LinkId l : links[r]) mine = std::max(mine, load[l]);
      const double f = std::sqrt(worst / mine);
      moved = std::max(moved, f - 1.0);
      rings[r].share *= f;
      sum += rings[r].share;
    }
    for (auto& ch : rings) ch.share /= sum;
    if (moved < 1e-9) break;  // every ring already touches the busiest load
  }
}

}  // namespace

std::vector<RingChannel> ring_channels(const Cluster& cluster, const std::vector<int>& gpus, int max_rings) {
  const std::size_t n = gpus.size();
  auto bw = [&](int a, int b) {
    return cluster.route_bandwidth_Bps(cluster.gpu_endpoint(a), cluster.gpu_endpoint(b));
  };
  if (n < 3) return {RingChannel{gpus, n == 2 ? bw(gpus[0], gpus[1]) : 0.0, 1.0}};
  std::map<LinkId, int> use;  // rings already crossing each directed link
  std::vector<LinkId> path;    // reused: routes are composed on demand
  auto route_use = [&](int a, int b) {
    int worst = 0;
    cluster.route_into(cluster.gpu_endpoint(a), cluster.gpu_endpoint(b), path);
    for (LinkId l : path) worst = std::max(worst, use[l]);
    return worst;
  };
  std::vector<RingChannel> rings;
  for (int r = 0; r < max_rings; ++r) {
    // Greedy: next hop with the most bandwidth left per ring already using it.
    RingChannel ch{{gpus.front()}, 0.0};
    std::vector<char> used(n, 0);
    used[0] = 1;
    for (std::size_t step = 1; step < n; ++step) {
      std::size_t best = n;
      double best_score = -1.0;
      for (std::size_t i = 0; i < n; ++i) {
        if (used[i]) continue;
        const double score = bw(ch.order.back(), gpus[i]) / (1.0 + route_use(ch.order.back(), gpus[i]));
        if (score > best_score) {
          best = i;
          best_score = score;
        }
      }
      used[best] = 1;
      ch.order.push_back(gpus[best]);
    }
    int min_use = r;
    ch.bottleneck_Bps = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < n; ++i) {
      min_use = std::min(min_use, route_use(ch.order[i], ch.order[(i + 1) % n]));
      ch.bottleneck_Bps = std::min(ch.bottleneck_Bps, bw(ch.order[i], ch.order[(i + 1) % n]));
    }
    // Stop when a ring only repeats used links, or needs links much thinner than the first ring's
    // (NCCL does not put channels on PCIe while NVLink rings exist).
    if (r > 0 && (min_use >= r || ch.bottleneck_Bps < 0.5 * rings.front().bottleneck_Bps)) break;
    for (std::size_t i = 0; i < n; ++i) {
      cluster.route_into(cluster.gpu_endpoint(ch.order[i]), cluster.gpu_endpoint(ch.order[(i + 1) % n]), path);
      for (LinkId l : path) ++use[l];
    }
    rings.push_back(std::move(ch));
  }
  balance_shares(cluster, rings);
  return rings;
}

}  // namespace moesim
