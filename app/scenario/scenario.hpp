#pragma once
// A scenario: YAML → typed structs → validation, with every problem reported at once as
// file:line:col. `--set key.path=value` overrides are applied to the YAML tree first.
#include <cstdint>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "hardware/cluster.hpp"
#include "models/model_spec.hpp"
#include "models/routing.hpp"
#include "models/workload.hpp"
#include "core/params.hpp"
#include "serving/config.hpp"
#include "serving/workload.hpp"

namespace moesim {

/// One `policy:` or `predictor:` entry: a registered name, a label for the result, and its
/// validated options. An entry is written as a name or as {name: ..., label: ..., <option>: ...}.
struct PluginEntry {
  std::string name;
  /// Unique within its list: the `label:` given, else the name, else (when unlabeled entries
  /// share a name) the name followed by "-key=value" for each option whose values differ among
  /// them, e.g. "token-to-expert-accuracy=0.8".
  std::string label;
  ParamSet params;
  SourceLocation where;
};
using PolicyEntry = PluginEntry;
using PredictorEntry = PluginEntry;

/// The routing model chosen under `workload.routing`.
struct RoutingChoice {
  std::string kind;
  bool token_draws = false;  ///< `draws: tokens`: never count-level
  ParamSet params;
  SourceLocation where;
};

/// `workload.kind`: a fixed prefill batch shape, or request-level serving.
enum class WorkloadKind { kPrefill, kServing };

/// A fully validated scenario.
struct Scenario {
  std::string file;
  std::string base_dir;
  std::string name;
  std::uint64_t seed = 1;
  ModelSpec model;
  SourceLocation model_where;
  ClusterSpec hardware;
  SourceLocation hardware_where;
  WorkloadKind workload_kind = WorkloadKind::kPrefill;
  /// Prefill: the workload. Serving: a representative shape that policies and predictors profile
  /// with (batch_size = the cluster's GPUs, seq_len = the mean prompt length, batches = 1).
  PrefillWorkload workload;
  RoutingChoice routing;
  // Serving only (workload.kind: serving); defaults otherwise. See app/scenario_serving.hpp.
  ServingWorkload serving_workload;
  SchedulerConfig serving;       ///< `serving:`
  DeploymentConfig deployment;   ///< `deployment:` (absent: colocated)
  SourceLocation serving_workload_where;  ///< the `workload:` mapping
  SourceLocation serving_where;           ///< `serving:` (or the file when absent)
  SourceLocation deployment_where;        ///< `deployment:` (or the file when absent)
  SourceLocation arrival_where;           ///< `workload.arrival` (or `workload:` when absent)
  SourceLocation prompt_where;            ///< `workload.prompt_tokens` (or `workload:` when absent)
  SourceLocation output_where;            ///< `workload.output_tokens` (or `workload:` when absent)
  std::vector<PolicyEntry> policies;
  std::vector<PredictorEntry> predictors;  ///< runs = policies × predictors
  bool trace = false;
  /// Accepted but questionable choices (`file:line:col: warning: ...`), printed by the CLI and
  /// kept in result.json.
  std::vector<Diagnostic> warnings;
  YAML::Node resolved;  ///< every value after presets, overrides and defaults
};

/// The routing model's view of the scenario.
RoutingContext routing_context(const Scenario& s);

/// Loads and validates `path` with `overrides` ("a.b.c=value"). Throws InputError listing every
/// problem found.
Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides = {});
/// Same, from YAML text (tests); `file` is the name used in diagnostics.
Scenario load_scenario_text(const std::string& text, const std::string& file,
                            const std::vector<std::string>& overrides = {},
                            const std::string& base_dir = ".");

}  // namespace moesim
