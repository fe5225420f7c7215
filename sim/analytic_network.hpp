#pragma once
// Analytic network model: prices each transfer from the bytes on its busiest link, without the
// per-flow rate recomputation of the flow backend (sim/flow_network.hpp). Meant for clusters so
// large that max-min fair sharing, recomputed on every flow start and end, dominates run time.
//
// Model. Transfers started in the same tick form a *group*. At EventPriority::kReallocate of that
// tick (after every start of the tick is known) the group is priced at once:
//   load_l   = sum of the bytes of the group's flows that cross link l
//   finish_f = start + sum of f's per-hop latencies + max over f's links l of load_l / bandwidth_l
// A flow with no links completes at once (this tick); a flow of zero bytes after its latency.
// Pricing costs O(flows x path length) per group; completions are batched, one event per distinct
// completion tick.
//
// The approximation: flows of different groups do not interact. A group is priced as if the
// network were empty, so traffic still in flight from an earlier tick neither slows it down nor is
// slowed by it (overlapping collectives that started at different ticks are under-priced).
//
// When is this exact against max-min fair sharing (the flow backend)? Take one group of flows that
// all start together, with equal path latencies (so the flow backend activates them together) and
// no other traffic. Link l can move at most bandwidth_l bytes per second, so whatever the sharing,
// the last of l's flows cannot finish before load_l / bandwidth_l; the analytic time of every flow
// on l is at least that. Hence:
//  - The LAST completion on a link l is exact when l is the bottleneck of every flow crossing it
//    (load_l / bandwidth_l is the largest term of each of them): max-min fairness then keeps l
//    saturated until its last flow is done (work conservation), which is at load_l / bandwidth_l.
//    A collective whose end is set by one such link (a hot receiver's ingress, a NIC) is exact.
//  - Equal-size flows whose only shared, bottleneck link is the same are exact individually:
//    n flows of b bytes each get bandwidth/n and all finish at n·b / bandwidth.
//  - Flows on disjoint links are exact individually (each alone: bytes / its narrowest link);
//    so is every step of a ring all-reduce or all-gather, whose flows use disjoint links.
//  - Earlier completions of unequal flows sharing a bottleneck are over-estimated: the small flow
//    of {1 GB, 3 GB} on a 10 GB/s link finishes at 200 ms under max-min sharing but is priced at the
//    link's drain time, 400 ms. So are flows whose busiest link is not where they are bottlenecked
//    under max-min (rates freed elsewhere are not redistributed here).
//  - Flows of one group with different path latencies are treated as sharing from the same instant,
//    while the flow backend lets the shorter-latency ones run alone first.
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "sim/network_backend.hpp"
#include "sim/simulator.hpp"

namespace moesim {

/// Prices transfers per start tick from link loads (see the file comment): the `analytic` backend.
class AnalyticNetwork final : public NetworkBackend {
 public:
  explicit AnalyticNetwork(Simulator& sim) : sim_(sim) {}

  LinkId add_link(std::string name, double bandwidth_Bps, Tick latency) override;
  const Link& link(LinkId id) const override { return links_[id]; }
  std::size_t link_count() const override { return links_.size(); }

  /// Queues the flow in this tick's group; it is priced at kReallocate of this tick.
  using NetworkBackend::start_flow;
  FlowId start_flow(const std::vector<LinkId>& path, double bytes, DoneCallback on_done, HopLatency hop) override;
  std::size_t active_flows() const override { return active_; }
  /// Number of groups priced (for benchmarks; the flow backend's reallocations() counterpart).
  std::uint64_t groups_priced() const { return groups_priced_; }

 private:
  /// A flow waiting in the current group; its links are path_links_[first, first + count).
  struct Pending {
    std::uint32_t first;
    std::uint32_t count;
    double bytes;
    Tick latency;
    DoneCallback on_done;
  };
  void price_group();
  /// Adds `cb` to the batch completing at `at`, scheduling that batch's event if it is new.
  void complete_at(Tick at, DoneCallback cb);

  Simulator& sim_;
  std::vector<Link> links_;
  std::vector<double> bytes_per_tick_;  ///< bandwidth of each link in bytes per tick
  std::vector<Pending> group_;          ///< flows started this tick, not yet priced
  std::vector<LinkId> path_links_;      ///< the group's paths, flattened (one allocation, reused)
  bool price_pending_ = false;
  std::vector<double> load_;            ///< scratch: bytes of the group per link, zero between groups
  std::vector<double> drain_;           ///< scratch: ticks for each touched link to carry its load
  std::vector<LinkId> touched_;         ///< scratch: links with a nonzero load_
  std::unordered_map<Tick, std::vector<DoneCallback>> batches_;  ///< completions by tick
  // The batch complete_at added to last: a group's flows often finish at the same tick, so most
  // look-ups are saved. Reset when that batch runs.
  Tick last_at_ = -1;
  std::vector<DoneCallback>* last_batch_ = nullptr;
  std::vector<std::vector<DoneCallback>> spare_;  ///< emptied batches, kept for their capacity
  std::size_t active_ = 0;
  FlowId next_id_ = 0;
  std::uint64_t groups_priced_ = 0;
};

}  // namespace moesim
