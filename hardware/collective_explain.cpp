#include "hardware/collective_explain.hpp"

#include <algorithm>
#include <map>

namespace moesim {
namespace {

// Wire bytes per directed link in one step, from (src, dst, bytes) flows routed on `c`.
struct LinkLoads {
  const Cluster& c;
  std::map<LinkId, double> bytes;
  double max_latency_us = 0.0;
  std::vector<LinkId> path;

  void add(int src, int dst, double b) {
    c.route_into(c.gpu_endpoint(src), c.gpu_endpoint(dst), path);
    for (LinkId l : path) bytes[l] += b;
    max_latency_us = std::max(max_latency_us, ticks_to_us(c.route_latency(c.gpu_endpoint(src), c.gpu_endpoint(dst))));
  }
  // The link that takes longest to drain its step's bytes.
  void bottleneck(CollectiveExplanation& e) const {
    double worst = -1.0;
    for (const auto& [l, b] : bytes) {
      const auto& info = c.links()[static_cast<std::size_t>(l)];
      const double t = b / info.bandwidth_Bps;
      if (t > worst) {
        worst = t;
        e.bottleneck_link = info.name;
        e.bottleneck_class = link_class_name(info.cls);
        e.bottleneck_Bps = info.bandwidth_Bps;
        e.bottleneck_bytes = b;
      }
    }
    e.hop_latency_us = max_latency_us;
  }
};

}  // namespace

CollectiveExplanation explain_collective(const Cluster& c, CollectiveKind kind, int gpus, double bytes) {
  CollectiveExplanation e;
  std::vector<int> ids(static_cast<std::size_t>(gpus));
  for (int i = 0; i < gpus; ++i) ids[static_cast<std::size_t>(i)] = i;
  const std::vector<int> members = kind == CollectiveKind::kSendRecv ? std::vector<int>{0, gpus - 1} : ids;
  const CollectiveCalibration* cal = collective_calibration(c, kind, members);
  e.calibrated = cal != nullptr;
  e.launch_us = cal ? cal->launch_us : c.spec().collective_launch_us;
  // The buffer the efficiency curve is indexed by, as the simulation indexes it.
  const double buffer = bytes;  // every kind indexes its curve by the per-GPU buffer
  e.efficiency = cal ? cal->efficiency.at(std::max(1.0, buffer)) : 1.0;
  e.protocol = cal ? "measured efficiency curve (calibration profile)"
                   : "one protocol at line rate (no LL/LL128/Simple choice is modelled)";
  LinkLoads loads{c, {}, 0.0, {}};
  const double n = static_cast<double>(gpus);
  switch (kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kAllGather: {
      e.algorithm = "ring";
      e.steps = kind == CollectiveKind::kAllReduce ? 2 * (gpus - 1) : gpus - 1;
      e.step_bytes = bytes / n;
      if (gpus < 2) break;
      e.channels = ring_channels(c, ids, kMaxRingChannels);
      double total = 0.0;
      for (const auto& ch : e.channels) total += ch.bottleneck_Bps;
      // Each channel carries its bandwidth's share of every step (as the simulation splits it).
      for (const auto& ch : e.channels)
        for (std::size_t i = 0; i < ch.order.size(); ++i)
          loads.add(ch.order[i], ch.order[(i + 1) % ch.order.size()],
                    e.step_bytes / e.efficiency * ch.bottleneck_Bps / total);
      break;
    }
    case CollectiveKind::kAllToAll:
      e.algorithm = "pairwise";
      e.steps = gpus > 1 ? 1 : 0;  // one GPU sends nothing
      e.step_bytes = bytes / n;
      for (int i = 0; i < gpus; ++i)
        for (int j = 0; j < gpus; ++j)
          if (i != j) loads.add(i, j, e.step_bytes / e.efficiency);
      break;
    case CollectiveKind::kSendRecv:
      e.algorithm = "point-to-point";
      e.step_bytes = bytes;
      loads.add(0, gpus - 1, bytes / e.efficiency);
      break;
  }
  loads.bottleneck(e);
  const double step_us = e.bottleneck_Bps > 0 ? e.bottleneck_bytes / e.bottleneck_Bps * 1e6 : 0.0;
  e.estimate_us = e.launch_us + (loads.bytes.empty() ? 0.0 : e.steps * (e.hop_latency_us + step_us));
  e.simulated_us = ticks_to_us(collective_time(c, kind, gpus, bytes));
  return e;
}

}  // namespace moesim
