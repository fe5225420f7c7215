#pragma once
// YAML read from a user's file (scenarios, calibration profiles, --set values): one document, its
// aliases bounded, every parse failure an InputError at its line and column.
//
// yaml-cpp builds an alias as a shared node, so an alias inside the node it names (`a: &z [*z]`)
// makes a cycle that every later walk of the tree follows until the stack overflows, and nested
// aliases (ten aliases of ten aliases, eight levels deep) make a tree of 10^8 nodes out of a few
// lines. Both are refused before the tree is built, from yaml-cpp's event stream: an alias whose
// anchor is still open is recursive, and the nodes the document would have with every alias
// expanded are counted against kMaxYamlNodes.
#include <cstdint>
#include <string>

#include <yaml-cpp/yaml.h>

namespace moesim {

/// The most nodes a YAML input may have with its aliases expanded (a scenario has a few hundred;
/// an inline table of a thousand rows of ten, 10^4).
inline constexpr std::uint64_t kMaxYamlNodes = 1'000'000;

/// Parses `text`, read from `file` (for messages), as one YAML document. Throws InputError located
/// at the fault for malformed YAML, a second document, a recursive alias, or aliases expanding
/// past kMaxYamlNodes. `what` starts the malformed-YAML message ("malformed YAML", "invalid
/// profile").
YAML::Node load_yaml_input(const std::string& text, const std::string& file, const std::string& what = "malformed YAML");

}  // namespace moesim
