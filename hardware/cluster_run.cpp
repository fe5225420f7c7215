#include "hardware/cluster_run.hpp"

#include <utility>

namespace moesim {

NetworkOptions network_options(const ClusterSpec& spec) {
  NetworkOptions o;
  o.flow_completion_window = us_to_ticks(spec.flow_completion_window_us);  // FlowNetwork takes at least 1
  return o;
}

ClusterRun::ClusterRun(const Cluster& cluster, PlanExecutor::Hooks hooks)
    : net(make_network(cluster.spec().network_model, sim, network_options(cluster.spec()))),
      // The links are installed before the executor sees the network.
      exec((cluster.install(*net), sim), *net, cluster.num_gpus(), std::move(hooks)) {}

ClusterRun::ClusterRun(const Cluster& cluster, const ComputeCostModel& cost)
    : ClusterRun(cluster, engine_hooks(cluster, cost)) {}

}  // namespace moesim
