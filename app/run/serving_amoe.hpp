#pragma once
// Serving scenarios whose policy is `amoe`: the deployment is checked (GPU split, experts and
// KV cache in memory) with errors located at the policy entry, and run on AMoE's engine.
#include <string>

#include <nlohmann/json.hpp>

#include "app/scenario/scenario.hpp"
#include "app/run/serving_run.hpp"
#include "serving/amoe/amoe_engine.hpp"

namespace moesim {

/// The deployment `entry` (an `amoe` policy) describes on the scenario's cluster, and each
/// attention GPU's KV blocks. Throws InputError at the entry for a split that leaves no
/// attention or expert GPU, experts that do not fit on their GPU, or a KV cache that cannot
/// hold the longest request.
struct AmoeDeployment {
  AmoeConfig config;
  std::vector<std::int64_t> kv_blocks;
};
AmoeDeployment amoe_deployment(const Scenario& s, const PluginEntry& entry);

/// One serving run of an `amoe` policy (the same outputs as run_serving).
nlohmann::json run_amoe_serving(const Scenario& s, const PluginEntry& policy, std::string& requests_csv,
                                const ServingProgress& progress = {});

}  // namespace moesim
