#pragma once
// A model from its Hugging Face config.json, read as vLLM and SGLang read it: the architecture
// named in `architectures` picks which fields hold the expert count, widths and layer layout.
// Every field moesim uses is mapped by name; a needed field that is missing (or of the wrong
// type), or an architecture moesim does not know, is an error naming it; fields moesim does not
// use are reported so that the caller can list them once.
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "models/model_spec.hpp"

namespace moesim {

/// What reading a config.json gave: the model, or the first error (naming the field).
struct HfConfigRead {
  ModelSpec model;
  std::string error;                 ///< empty: read
  std::vector<std::string> ignored;  ///< top-level (and text_config) keys moesim does not use
  bool ok() const { return error.empty(); }
};

/// The architectures model_from_hf_config reads, with what they map from.
const std::vector<std::string>& hf_architectures();

/// Reads a parsed config.json. `name` becomes the model's name.
HfConfigRead model_from_hf_config(const nlohmann::json& config, const std::string& name);

}  // namespace moesim
