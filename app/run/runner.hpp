#pragma once
// Runs a validated scenario: for every (policy, predictor) pair, plans each batch, executes it
// on the engine and collects metrics. Produces the result.json document.
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/scenario/scenario.hpp"
#include "app/run/serving_run.hpp"
#include "policies/memory.hpp"

namespace moesim {

/// Builds each policy and checks that its layout fits in GPU memory (InputError at the policy
/// entry otherwise). Used by `validate` and before `run`.
void check_scenario_fits(const Scenario& s);

/// Runs every (policy, predictor) of `s`. With `trace_dir` non-empty and `s.trace`, writes a
/// Chrome trace per run there (trace-<label>.json, or trace-<label>-<predictor label>.json when
/// the scenario has several predictors). Returns {"scenario": resolved, "runs": [{policy, label,
/// predictor, predictor_label, metrics[, trace]}, ...]}, policies outermost.
/// A serving scenario writes requests.csv (every run's requests) into `trace_dir` when it is not
/// empty, and reports its progress to `progress` (from one run at a time).
/// A prefill scenario calls `batch_done` after each batch of each run (from the run's thread).
/// The runs go on up to `jobs` threads (`moesim run --jobs`; sweeps and guidelines, parallel over
/// their points, keep 1). Whatever `jobs`, the result, requests.csv and traces are byte-identical,
/// and a run's InputError is the one a serial loop would have met first.
nlohmann::json run_scenario(const Scenario& s, const std::string& trace_dir = {}, const ServingProgress& progress = {},
                            unsigned jobs = 1, const std::function<void()>& batch_done = {});

/// The resolved YAML scenario as JSON (numbers and booleans typed).
nlohmann::json yaml_to_json(const YAML::Node& node);

}  // namespace moesim
