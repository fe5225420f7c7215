#pragma once
// The declared keys of the scenario sections that scenario.cpp and scenario_sections.cpp read
// themselves (the serving sections declare theirs in scenario_serving.hpp). Each list is the one
// its reader validates against, so the generated reference (`moesim list --markdown`) and JSON
// Schema (`moesim schema`) cannot drift from what the loader accepts.
#include <vector>

#include "core/params.hpp"
#include "models/model_spec.hpp"

namespace moesim {

/// Top-level keys besides the sections: name, description, seed.
std::vector<ParamSpec> top_level_specs();
/// The sections a scenario may hold, in the order the reference lists them.
const std::vector<std::string>& top_level_sections();
/// `workload:` keys of a prefill workload (kind prefill, the default).
std::vector<ParamSpec> prefill_workload_specs();
/// `workload.routing.draws`: whether a layer may be drawn as counts.
std::vector<ParamSpec> routing_draws_specs();
/// `output:` keys.
std::vector<ParamSpec> output_specs();
/// `model.attention:` keys (defaults from `base`, or required where a preset has no default when null).
std::vector<ParamSpec> attention_specs(const AttentionSpec* base);

}  // namespace moesim
