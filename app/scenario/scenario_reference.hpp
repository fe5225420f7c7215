#pragma once
// Every section of a scenario file with its declared keys, gathered from the lists the loader
// validates against (scenario_keys.hpp, scenario_sections.hpp, scenario_serving.hpp and the
// plug-in registries), for the two documents generated from them: the Markdown reference
// (`moesim list --markdown`, checked in as docs/reference.md) and the JSON Schema of scenario
// files (`moesim schema`, checked in as scenarios/moesim.schema.json). Tests fail when either
// checked-in file differs from what the binary generates.
#include <string>
#include <vector>

#include "core/params.hpp"

namespace moesim {

/// A key that is not a plain typed value: a nested section, a name-or-mapping, a list of entries.
struct SectionLink {
  std::string key;
  std::string help;
  std::string section;  ///< path of the section documenting it ("" for a plain name or path)
};

/// One mapping of a scenario file and the keys it accepts.
struct ScenarioSection {
  std::string path;     ///< "workload", "serving.slo", "workload.arrival"
  std::string variant;  ///< the discriminating key's value ("kind: serving", "process: gamma"), or ""
  std::string summary;  ///< one paragraph: what the section is, its shorthands
  std::vector<ParamSpec> keys;
  std::vector<SectionLink> links;
};

/// Every section, in reference order.
std::vector<ScenarioSection> scenario_sections();

/// The whole Markdown reference: scenario sections, then the registries.
std::string reference_markdown();
/// The JSON Schema (draft-07) of scenario files, pretty-printed with a trailing newline.
std::string scenario_schema_json();

}  // namespace moesim
