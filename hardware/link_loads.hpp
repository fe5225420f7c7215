#pragma once
// Bytes per directed link from a set of concurrent (source GPU, destination GPU, bytes) flows on
// a cluster, and what they cost at line rate on an idle cluster. Shared by the collectives (to
// scale their flows to NCCL's time) and their explanation (to name the bottleneck link).
#include <algorithm>
#include <map>
#include <vector>

#include "hardware/cluster.hpp"

namespace moesim {

/// Accumulated link loads of concurrent flows; `seconds()` is the busiest link's drain time.
class LinkLoads {
 public:
  explicit LinkLoads(const Cluster& c) : c_(c) {}

  void add(int src_gpu, int dst_gpu, double bytes) {
    const int s = c_.gpu_endpoint(src_gpu), d = c_.gpu_endpoint(dst_gpu);
    c_.route_into(s, d, path_);
    for (LinkId l : path_) bytes_[l] += bytes;
    max_latency_ = std::max(max_latency_, c_.route_latency(s, d));
  }
  bool empty() const { return bytes_.empty(); }
  /// The link that takes longest to drain its bytes (0 when nothing moves).
  LinkId busiest() const {
    LinkId best = 0;
    double worst = -1.0;
    for (const auto& [l, b] : bytes_)
      if (b / c_.links()[l].bandwidth_Bps > worst) worst = b / c_.links()[l].bandwidth_Bps, best = l;
    return best;
  }
  double bytes_on(LinkId l) const {
    const auto it = bytes_.find(l);
    return it == bytes_.end() ? 0.0 : it->second;
  }
  /// The busiest link's bytes over its bandwidth (0 when nothing moves).
  double seconds() const { return empty() ? 0.0 : bytes_on(busiest()) / c_.links()[busiest()].bandwidth_Bps; }
  /// The largest route latency among the flows added.
  Tick max_latency() const { return max_latency_; }

 private:
  const Cluster& c_;
  std::map<LinkId, double> bytes_;
  Tick max_latency_ = 0;
  std::vector<LinkId> path_;
};

}  // namespace moesim
