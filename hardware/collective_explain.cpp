#include "hardware/collective_explain.hpp"

#include <algorithm>
#include <map>

#include "hardware/link_loads.hpp"

namespace moesim {
namespace {

// The link of `loads` that drains last, with what it carries (wire bytes per step).
void name_bottleneck(const Cluster& c, const LinkLoads& loads, CollectiveExplanation& e) {
  if (loads.empty()) return;
  const LinkId l = loads.busiest();
  const auto& info = c.links()[l];
  e.bottleneck_link = info.name;
  e.bottleneck_class = link_class_name(info.cls);
  e.bottleneck_Bps = info.bandwidth_Bps;
  e.bottleneck_bytes = loads.bytes_on(l);
  e.hop_latency_us = ticks_to_us(loads.max_latency());
}

}  // namespace

CollectiveExplanation explain_collective(const Cluster& c, CollectiveKind kind, int gpus, double bytes) {
  CollectiveExplanation e;
  std::vector<int> ids(static_cast<std::size_t>(gpus));
  for (int i = 0; i < gpus; ++i) ids[static_cast<std::size_t>(i)] = i;
  const std::vector<int> members = kind == CollectiveKind::kSendRecv ? std::vector<int>{0, gpus - 1} : ids;
  const CollectiveCalibration* cal = collective_calibration(c, kind, members);
  e.calibrated = cal != nullptr;
  const bool nccl = !cal && c.spec().collective_model == "nccl";
  e.model = cal ? "calibrated" : c.spec().collective_model;
  e.launch_us = cal ? cal->launch_us : c.spec().collective_launch_us;
  // The buffer the efficiency curve is indexed by, as the simulation indexes it.
  const double buffer = bytes;  // every kind indexes its curve by the per-GPU buffer
  e.efficiency = cal ? cal->efficiency.at(std::max(1.0, buffer)) : 1.0;
  e.protocol = cal ? "measured efficiency curve (calibration profile)" : "one protocol at line rate (collective_model line-rate)";
  LinkLoads loads(c);
  LinkLoads raw(c);  // point-to-point under nccl: data bytes, before NCCL's rates
  const double n = static_cast<double>(gpus);
  double nccl_us = 0.0;  // NCCL's own time for the choice (nccl)
  switch (kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kAllGather: {
      e.algorithm = "ring";
      e.steps = kind == CollectiveKind::kAllReduce ? 2 * (gpus - 1) : gpus - 1;
      e.step_bytes = bytes / n;
      if (gpus < 2) break;
      if (nccl) {
        const NcclChoice choice = nccl_choose(c, kind, ids, bytes);
        e.topology = choice.topo;
        e.candidates = choice.candidates;
        e.algorithm = nccl_algo_name(choice.best.algo);
        e.protocol = nccl_proto_name(choice.best.proto);
        e.bus_GBps = choice.best.bus_GBps;
        e.alg_GBps = choice.best.alg_GBps;
        e.launch_us = choice.best.latency_us;
        nccl_us = choice.best.time_us;
      }
      if (e.algorithm == "tree") {
        // Chains inside the nodes, a tree across them; every edge carries the buffer both ways.
        e.steps = 1;
        e.step_bytes = bytes;
        const int channels = nccl_tree_channels(e.topology);
        for (int k = 0; k < channels; ++k) {
          for (const auto& [child, parent] : tree_edges(c, ids, k)) {
            loads.add(child, parent, bytes / channels);
            loads.add(parent, child, bytes / channels);
          }
        }
        break;
      }
      e.channels = ring_channels(c, ids, kMaxRingChannels);
      // Each channel carries its share of every step (as the simulation splits it).
      for (const auto& ch : e.channels)
        for (std::size_t i = 0; i < ch.order.size(); ++i)
          loads.add(ch.order[i], ch.order[(i + 1) % ch.order.size()], e.step_bytes / e.efficiency * ch.share);
      break;
    }
    case CollectiveKind::kAllToAll:
      e.algorithm = "pairwise";
      if (nccl) e.launch_us = 0.0;  // the slowest pair's NCCL latency, below
      e.steps = gpus > 1 ? 1 : 0;  // one GPU sends nothing
      e.step_bytes = bytes / n;
      for (int i = 0; i < gpus; ++i)
        for (int j = 0; j < gpus; ++j) {
          if (i == j) continue;
          if (nccl) {
            // NCCL sends each pair as one message: its protocol and NCCL link rate per pair.
            const NcclCandidate k = nccl_p2p(c, i, j, e.step_bytes);
            e.protocol = nccl_proto_name(k.proto);
            e.launch_us = std::max(e.launch_us, k.latency_us);
            loads.add(i, j, e.step_bytes * price_p2p(c, i, j, e.step_bytes).wire_scale);
            raw.add(i, j, e.step_bytes);
          } else {
            loads.add(i, j, e.step_bytes / e.efficiency);
          }
        }
      break;
    case CollectiveKind::kSendRecv:
      e.algorithm = "point-to-point";
      e.step_bytes = bytes;
      if (nccl) {
        const NcclCandidate k = nccl_p2p(c, 0, gpus - 1, bytes);
        e.protocol = nccl_proto_name(k.proto);
        e.candidates = {k};
        e.launch_us = k.latency_us;
        e.bus_GBps = e.alg_GBps = k.alg_GBps;
        nccl_us = k.time_us;
        loads.add(0, gpus - 1, bytes * price_p2p(c, 0, gpus - 1, bytes).wire_scale);
        raw.add(0, gpus - 1, bytes);
      } else {
        loads.add(0, gpus - 1, bytes / e.efficiency);
      }
      break;
  }
  name_bottleneck(c, loads, e);
  if (nccl) e.hop_latency_us = 0.0;  // NCCL's latency, in the launch, includes the hops
  const double step_us = e.bottleneck_Bps > 0 ? e.bottleneck_bytes / e.bottleneck_Bps * 1e6 : 0.0;
  e.estimate_us = e.launch_us + (loads.empty() ? 0.0 : e.steps * (e.hop_latency_us + step_us));
  if (nccl && nccl_us > 0.0 && kind != CollectiveKind::kSendRecv) {
    // The flows carry bytes / (NCCL's bandwidth / line rate): that ratio is the efficiency.
    const double transfer_us = nccl_us - e.launch_us;
    const double line_us = e.steps * (e.bottleneck_bytes / e.bottleneck_Bps * 1e6);
    if (line_us > 0 && transfer_us > 0) {
      e.efficiency = line_us / transfer_us;
      e.bottleneck_bytes /= e.efficiency;
    }
    e.estimate_us = nccl_us;
  } else if (nccl && e.bottleneck_bytes > 0) {
    // Point-to-point: the bottleneck link's data bytes over the wire bytes it carries.
    e.efficiency = raw.bytes_on(loads.busiest()) / e.bottleneck_bytes;
    if (kind == CollectiveKind::kSendRecv) e.estimate_us = nccl_us;
  }
  e.simulated_us = ticks_to_us(collective_time(c, kind, gpus, bytes));
  return e;
}

}  // namespace moesim
