#pragma once
// Host work and its cost model ("policies decide, the engine times", DESIGN.md). What runs on a
// host CPU thread beside the GPUs (a policy's scheduling step or placement solve, a predictor's
// overhead, a serving engine's per-step scheduling and launch, AMoE's queue decisions) is planned
// as a host task: one OpKind::kHost op naming the work and its size, with its reference time,
// the time the work takes on the host its figure comes from (a paper's measurement, a policy
// option, an engine profile). The executor asks HostCostModel how long it takes here, as it asks
// ComputeCostModel about a kernel.
//
// Today's law is one factor: the cluster's `host_speed`, relative to the reference hosts (1 = the
// figures as given). A calibration that measures a host's speed sets it; a law per kind of work
// (a scheduler's time growing with experts × GPUs, a solver's with the layer's experts) can grow
// here without touching the policies, which state only what runs and its size.
#include <cstdint>
#include <span>

#include "sim/tick.hpp"
#include "sim/work.hpp"

namespace moesim {

/// Host work `what` (a static label: "harmoeny.schedule", "exflow.solve", "predictor",
/// "engine.step", "amoe.decision") of `units` units of that work (decisions, experts, tokens,
/// sequences), taking `reference_s` seconds on its reference host.
Op host_work(const char* what, std::int64_t units, double reference_s);
/// The reference time of host work (seconds).
double host_reference_s(const Op& work);

/// Prices host work on a cluster's host.
class HostCostModel {
 public:
  /// `speed`: the host's speed relative to the reference hosts (> 0; 2 = twice as fast).
  explicit HostCostModel(double speed = 1.0);
  /// Time of `work` (host ops, run one after another on one host thread).
  Tick time(std::span<const Op> work) const;
  Tick time(const Op& work) const { return time(std::span<const Op>(&work, 1)); }
  double speed() const { return speed_; }

 private:
  double speed_;
};

}  // namespace moesim
