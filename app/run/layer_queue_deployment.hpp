#pragma once
// Serving scenarios on an attention–expert split (the `amoe` policy): the deployment is read
// from the policy entry and checked (GPU split, experts and KV cache in memory) with errors
// located at the entry. The serving engine then runs it in layer-queue mode (app/run/serving_run.cpp).
#include "app/scenario/scenario.hpp"
#include "serving/amoe/layer_queues.hpp"

namespace moesim {

/// The deployment `entry` (an `amoe` policy) describes on the scenario's cluster, and each
/// attention GPU's KV blocks. Throws InputError at the entry for a split that leaves no
/// attention or expert GPU, experts that do not fit on their GPU, or a KV cache that cannot
/// hold the longest request.
LayerQueueDeployment layer_queue_deployment(const Scenario& s, const PluginEntry& entry);

}  // namespace moesim
