#pragma once
// Typed, documented parameters read from YAML mappings. Every key is declared with its type,
// default, unit and help (as gem5 and SST declare theirs); unknown keys are errors that suggest the
// closest declared key; every problem is reported with file:line:col.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/diagnostics.hpp"

namespace moesim {

enum class ParamType { kInt, kFloat, kBool, kString, kIntList, kFloatList, kStringList };
const char* param_type_name(ParamType t);

/// Declaration of one parameter.
struct ParamSpec {
  std::string name;
  ParamType type = ParamType::kFloat;
  std::string default_value;  ///< YAML text; empty means required
  std::string unit;           ///< e.g. "GB/s", "us", "tokens"; empty if unitless
  std::string help;
  std::optional<double> min;  ///< inclusive lower bound for numbers (and list elements)
  std::optional<double> max;  ///< inclusive upper bound
  std::vector<std::string> choices;  ///< allowed values for strings (empty: any)
};

/// Maps YAML nodes back to their source, including values injected by `--set`.
class SourceMap {
 public:
  explicit SourceMap(std::string file = {}) : file_(std::move(file)) {}
  const std::string& file() const { return file_; }
  void add_override(const YAML::Node& node, std::string origin);
  SourceLocation locate(const YAML::Node& node) const;

 private:
  std::string file_;
  std::vector<std::pair<YAML::Node, std::string>> overrides_;
};

/// The validated values of one mapping, typed by their specs.
class ParamSet {
 public:
  std::int64_t get_int(const std::string& name) const;
  double get_float(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  std::string get_string(const std::string& name) const;
  std::vector<std::int64_t> get_int_list(const std::string& name) const;
  std::vector<double> get_float_list(const std::string& name) const;
  std::vector<std::string> get_string_list(const std::string& name) const;
  /// True when the user wrote the key (rather than the default applying).
  bool given(const std::string& name) const;
  SourceLocation where(const std::string& name) const;
  /// The resolved values as YAML (for writing the resolved scenario).
  YAML::Node to_yaml() const;

 private:
  friend ParamSet read_params(const YAML::Node&, const std::vector<ParamSpec>&, const SourceMap&,
                              Diagnostics&, const std::vector<std::string>&);
  struct Value {
    YAML::Node node;  ///< the value (user's or parsed default)
    bool given = false;
    SourceLocation where;
    ParamType type;
  };
  const Value& at(const std::string& name) const;
  std::map<std::string, Value> values_;
};

/// Reads `map` against `specs`. Keys in `passthrough` are allowed but not read (e.g. "name").
/// Problems go to `diags`; the returned set holds defaults where values were bad.
ParamSet read_params(const YAML::Node& map, const std::vector<ParamSpec>& specs,
                     const SourceMap& sources, Diagnostics& diags,
                     const std::vector<std::string>& passthrough = {});

/// Reports `key: ~` (or `key:` with nothing after it), which would silently mean the default, as
/// "'key' has no value". Returns true when `node` is such a null (false when it is absent or set).
bool report_null_value(const YAML::Node& node, const std::string& key, const SourceMap& sources, Diagnostics& diags);

/// Reports every key of `map` that is not in `known` (with a suggestion). Returns false if any.
bool reject_unknown_keys(const YAML::Node& map, const std::vector<std::string>& known,
                         const SourceMap& sources, Diagnostics& diags, const std::string& where_what);

/// One line per parameter: "name (type, default D, unit): help" — for `moesim list` and docs.
std::string describe_params(const std::vector<ParamSpec>& specs, const std::string& indent = "  ");

}  // namespace moesim
