#pragma once
// Runs a validated scenario: for every (policy, predictor) pair, plans each batch, executes it
// on the engine and collects metrics. Produces the result.json document.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/scenario.hpp"
#include "policies/policy.hpp"

namespace moesim {

/// Per-GPU memory of a policy's layout for one batch: weights, KV cache and activations.
struct MemoryEstimate {
  std::vector<double> weights;      ///< replicated non-expert weights + the policy's experts
  std::vector<double> kv_cache;     ///< home tokens × layers
  std::vector<double> activations;  ///< peak working set of one layer
  std::vector<double> total() const;
};
/// `expert_tokens[g]`: selections GPU g computes in its busiest layer.
MemoryEstimate estimate_memory(const ModelSpec& m, const Cluster& c, const Policy& policy,
                               const PolicyContext& ctx, const std::vector<std::int64_t>& home_tokens,
                               const std::vector<std::int64_t>& expert_tokens);

/// Builds each policy and checks that its layout fits in GPU memory (InputError at the policy
/// entry otherwise). Used by `validate` and before `run`.
void check_scenario_fits(const Scenario& s);

/// Runs every (policy, predictor) of `s`. With `trace_dir` non-empty and `s.trace`, writes a
/// Chrome trace per run there. Returns {"scenario": resolved, "runs": [...]}.
nlohmann::json run_scenario(const Scenario& s, const std::string& trace_dir = {});

/// The resolved YAML scenario as JSON (numbers and booleans typed).
nlohmann::json yaml_to_json(const YAML::Node& node);

}  // namespace moesim
