#pragma once
// Shared by the serving tests: one scenario text run with its first policy and predictor.
#include <string>

#include <nlohmann/json.hpp>

#include "app/scenario/scenario.hpp"
#include "app/run/serving_run.hpp"

namespace moesim::testing {

/// The metrics of `text` (a scenario, reported as `file` in errors) served once.
inline nlohmann::json serve_metrics(const std::string& text, const std::string& file = "serving.yaml") {
  const Scenario s = load_scenario_text(text, file);
  std::string csv;
  return run_serving(s, s.policies.front(), s.predictors.front(), "", csv)["metrics"];
}

}  // namespace moesim::testing
