#pragma once
// The request-level serving sections of a scenario: `workload:` with kind serving (requests,
// arrival process, prompt and output length distributions), `serving:` (the continuous-batching
// scheduler) and `deployment:` (colocated, or prefill and decode pools). Every key is a declared
// parameter; every problem is reported at its file:line:col (or the trace CSV's line:col).
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/params.hpp"
#include "serving/engine_profile.hpp"
#include "serving/workload.hpp"

namespace moesim {

struct Scenario;

/// Names accepted by `workload.arrival.process` and by `dist:` of a length distribution.
const std::vector<std::string>& arrival_process_names();
const std::vector<std::string>& length_dist_names();

/// `workload:` keys with kind serving (arrival, prompt_tokens and output_tokens are described
/// here for `moesim list`; their contents are declared by the functions below).
std::vector<ParamSpec> serving_workload_specs();
/// `workload.arrival` keys of one process (besides `process`).
std::vector<ParamSpec> arrival_specs(ArrivalSpec::Process process);
/// Keys of a length distribution mapping (besides `dist`).
std::vector<ParamSpec> length_dist_specs(LengthDist::Kind kind);
/// `serving:` keys (besides `slo` and `engine`) with `engine`'s defaults, `serving.slo` keys,
/// and `deployment:` keys (a colocated layout and the pool shorthands); `layout_specs(true)`:
/// the keys of `deployment.prefill` and `deployment.decode`.
std::vector<ParamSpec> scheduler_specs(const EngineProfile& engine = EngineProfile{});
std::vector<ParamSpec> slo_specs();
std::vector<ParamSpec> deployment_specs();
std::vector<ParamSpec> layout_specs(bool pool);

/// Reads `workload:` (kind serving; `routing` is left to the caller), `serving:` and
/// `deployment:` into `s`, whose model and hardware are already read (`cluster_ok`: the hardware
/// section had no errors, so GPU counts can be checked). Also fills `s.workload` with the
/// representative prefill shape. Trace files are resolved against `s.base_dir`. Resolved values
/// go to `workload_res` (all but routing), `serving_res` and `deployment_res`.
void read_serving_sections(const YAML::Node& root, Scenario& s, const SourceMap& src, Diagnostics& diags,
                           bool cluster_ok, YAML::Node& workload_res, YAML::Node& serving_res,
                           YAML::Node& deployment_res);

}  // namespace moesim
