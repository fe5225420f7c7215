#pragma once
// The simulator, network backend and executor that time plans on one cluster, built in one
// place for the prefill runner, the serving engine and collective pricing: the backend
// hardware.network_model names (sim/network_backend.hpp's registry), the cluster's links
// installed in it, and an executor on the cluster's GPUs with the cost model's hooks.
#include <memory>

#include "hardware/cluster.hpp"
#include "hardware/cost_model.hpp"
#include "sim/network_backend.hpp"
#include "sim/plan_executor.hpp"
#include "sim/simulator.hpp"

namespace moesim {

/// The backend options the cluster's spec sets (hardware.flow_completion_window_us).
NetworkOptions network_options(const ClusterSpec& spec);

/// One cluster's event loop, network and executor (neither copied nor moved: the executor and
/// the network hold the simulator).
struct ClusterRun {
  Simulator sim;
  std::unique_ptr<NetworkBackend> net;
  PlanExecutor exec;

  /// With `hooks` (engine_hooks, or a caller's variant of them).
  ClusterRun(const Cluster& cluster, PlanExecutor::Hooks hooks);
  /// With the cost model's hooks (engine_hooks).
  ClusterRun(const Cluster& cluster, const ComputeCostModel& cost);
  ClusterRun(const ClusterRun&) = delete;
  ClusterRun& operator=(const ClusterRun&) = delete;
};

}  // namespace moesim
