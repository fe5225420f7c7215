#pragma once
// Runs a `workload: {kind: serving}` scenario for one (policy, predictor): builds the pools of
// the deployment, sizes their KV caches, generates the requests and drives the serving engine.
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "app/scenario/scenario.hpp"
#include "hardware/cost_model.hpp"
#include "serving/engine.hpp"
#include "serving/pool.hpp"

namespace moesim {

/// Called as the simulation advances: simulated seconds, requests finished, requests in all.
using ServingProgress = std::function<void(double simulated_s, std::int64_t finished, std::int64_t total)>;

/// The pools of the scenario's deployment for one (policy, predictor), each with its policy and
/// predictor set up and its KV cache sized. Problems of a plug-in are located at its entry; a KV
/// cache that cannot hold the longest request is located at the workload.
std::vector<ServingPool> make_serving_pools(const Scenario& s, const Cluster& cluster, const RoutingModel& routing,
                                            const PluginEntry& policy, const PluginEntry& predictor);

/// The engine's setup for scenario `s` on these objects (which must outlive the engine): model,
/// scheduler and engine profile, arrivals, seed, count-level routing and cached prompts.
ServingSetup serving_setup(const Scenario& s, const Cluster& cluster, const ComputeCostModel& cost,
                           const RoutingModel& routing);

/// Builds every policy's pools and checks that each KV cache holds at least the longest
/// request (InputError located at the workload otherwise). `validate` and `run` call it.
void check_serving_fits(const Scenario& s);

/// One serving run. With `trace_dir` non-empty and `s.trace`, writes the Chrome trace there
/// (file name in run["trace"]). Appends the run's rows to `requests_csv` (without a header).
nlohmann::json run_serving(const Scenario& s, const PluginEntry& policy, const PluginEntry& predictor,
                           const std::string& trace_dir, std::string& requests_csv,
                           const ServingProgress& progress = {});

}  // namespace moesim
