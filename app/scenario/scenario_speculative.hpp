#pragma once
// `serving.speculative`: speculative decoding with the model's MTP module or a draft model.
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/params.hpp"
#include "serving/config.hpp"

namespace moesim {

/// Declared keys of `serving.speculative`.
std::vector<ParamSpec> speculative_specs();

/// Reads `serving.speculative` (absent: off) for `model`; problems are located errors
/// (`fallback` when the section is absent). The resolved keys go to `resolved`.
SpeculativeConfig read_speculative_section(const YAML::Node& node, const ModelSpec& model, const SourceMap& src,
                                           Diagnostics& diags, const SourceLocation& fallback, YAML::Node& resolved);

}  // namespace moesim
