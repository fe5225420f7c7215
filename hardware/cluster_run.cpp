#include "hardware/cluster_run.hpp"

#include <utility>

namespace moesim {

ClusterRun::ClusterRun(const Cluster& cluster, PlanExecutor::Hooks hooks)
    : net(make_network(cluster.spec().network_model, sim)),
      // The links are installed before the executor sees the network.
      exec((cluster.install(*net), sim), *net, cluster.num_gpus(), std::move(hooks)) {}

ClusterRun::ClusterRun(const Cluster& cluster, const ComputeCostModel& cost)
    : ClusterRun(cluster, engine_hooks(cluster, cost)) {}

}  // namespace moesim
