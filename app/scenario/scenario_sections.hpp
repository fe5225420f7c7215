#pragma once
// The `model:` and `hardware:` sections: a preset name, a preset with overrides, or written out
// in full. Each field is a declared parameter whose default is the preset's value, so overrides
// are validated like any key and the resolved section lists every value used.
#include <yaml-cpp/yaml.h>

#include "hardware/cluster.hpp"
#include "models/model_spec.hpp"
#include "core/params.hpp"

namespace moesim {

/// Parses `model:` (a preset, a preset with overrides, `hf_config: config.json` relative to
/// `base_dir` with overrides, or every field); on errors, records them and returns what could be
/// read. Warnings (config.json fields moesim ignores) go to `warnings` when given.
ModelSpec read_model_section(const YAML::Node& node, const SourceMap& src, Diagnostics& diags,
                             YAML::Node& resolved, const std::string& base_dir = ".",
                             std::vector<Diagnostic>* warnings = nullptr);
/// Parses `hardware:`; on errors, records them and returns what could be read. A
/// `calibration: PROFILE.yaml` key (relative to `base_dir`) applies a fitted profile.
ClusterSpec read_hardware_section(const YAML::Node& node, const SourceMap& src, Diagnostics& diags,
                                  YAML::Node& resolved, const std::string& base_dir);

/// Declared fields of a model (defaults from `base`, or required when base is null).
std::vector<ParamSpec> model_field_specs(const ModelSpec* base);
/// Declared fields of a cluster (defaults from `base`).
std::vector<ParamSpec> cluster_field_specs(const ClusterSpec& base);
/// Declared fields of a GPU (defaults from `base`).
std::vector<ParamSpec> gpu_field_specs(const GpuSpec& base);

}  // namespace moesim
