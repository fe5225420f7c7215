#pragma once
// Flow-level network model: a transfer is a flow along a fixed path of directed links; all active
// flows share every link by max-min fairness (progressive filling), recomputed whenever a flow
// starts or ends. Each flow first waits the sum of its hops' latencies, then transfers.
// A hot receiver's ingress link, a shared PCIe uplink or a NIC becomes the bottleneck because of
// this sharing, not because of a formula.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/network_backend.hpp"
#include "sim/simulator.hpp"

namespace moesim {

/// Shares link bandwidth between concurrent flows (max-min fair) and times their completion:
/// the `flow` network backend.
class FlowNetwork final : public NetworkBackend {
 public:
  explicit FlowNetwork(Simulator& sim) : sim_(sim) {}

  LinkId add_link(std::string name, double bandwidth_Bps, Tick latency) override;
  const Link& link(LinkId id) const override { return links_[id]; }
  std::size_t link_count() const override { return links_.size(); }

  FlowId start_flow(const std::vector<LinkId>& path, double bytes, DoneCallback on_done) override;

  /// Current rate of an active flow in bytes/s (0 while in its latency phase or unknown).
  double flow_rate_Bps(FlowId id) const;
  std::size_t active_flows() const override { return active_.size(); }
  /// Number of times rates were recomputed (for benchmarks).
  std::uint64_t reallocations() const { return reallocations_; }

 private:
  struct Flow {
    FlowId id;
    std::vector<LinkId> path;
    double bytes;
    double remaining;
    double rate = 0.0;  ///< bytes per tick
    DoneCallback on_done;
  };
  void activate(Flow flow);
  void request_reallocate();
  void advance_to_now();
  void reallocate();
  void on_completion_check(std::uint64_t generation);

  Simulator& sim_;
  std::vector<Link> links_;
  std::vector<Flow> active_;
  Tick last_update_ = 0;
  FlowId next_id_ = 0;
  bool reallocate_pending_ = false;
  std::uint64_t generation_ = 0;
  std::uint64_t reallocations_ = 0;
  // Scratch for progressive filling, indexed by link.
  std::vector<double> cap_left_;
  std::vector<std::uint32_t> unfrozen_;
  std::vector<std::uint32_t> link_start_, link_fill_, link_flows_;  ///< flows per link (CSR)
};

}  // namespace moesim
