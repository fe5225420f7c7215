#include "core/params.hpp"

#include <cmath>
#include <sstream>

namespace moesim {

const char* param_type_name(ParamType t) {
  switch (t) {
    case ParamType::kInt: return "integer";
    case ParamType::kFloat: return "number";
    case ParamType::kBool: return "boolean";
    case ParamType::kString: return "string";
    case ParamType::kIntList: return "list of integers";
    case ParamType::kFloatList: return "list of numbers";
    case ParamType::kStringList: return "list of strings";
  }
  return "?";
}

bool report_null_value(const YAML::Node& node, const std::string& key, const SourceMap& sources, Diagnostics& diags) {
  // A node built in code (Node()) stands for an absent section and has no mark; one parsed from
  // the file or a --set has one.
  if (!node || !node.IsNull() || node.Mark().line < 0) return false;
  diags.error(sources.locate(node), "'" + key + "' has no value: give one, or leave the key out for its default");
  return true;
}

void SourceMap::add_override(const YAML::Node& node, std::string origin) {
  // The value's own keys and elements too: an error inside a `--set key={...}` mapping names the
  // --set, not the position inside its text read as if it were the scenario file's.
  if (node.IsMap()) {
    for (const auto& kv : node) {
      add_override(kv.first, origin);
      add_override(kv.second, origin);
    }
  } else if (node.IsSequence()) {
    for (const auto& e : node) add_override(e, origin);
  }
  overrides_.emplace_back(node, std::move(origin));
}

SourceLocation SourceMap::locate(const YAML::Node& node) const {
  for (const auto& [n, origin] : overrides_)
    if (n.is(node)) return SourceLocation{origin, 0, 0};
  const YAML::Mark m = node.Mark();
  if (m.line < 0) return SourceLocation{file_, 0, 0};
  return SourceLocation{file_, m.line + 1, m.column + 1};
}

namespace {

std::string with_article(const char* noun) {
  const char c = noun[0];
  const bool vowel = c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u';
  return std::string(vowel ? "an " : "a ") + noun;
}

bool parse_scalar(const YAML::Node& n, ParamType t, std::string& err) {
  if (!n.IsScalar()) {
    err = std::string("expected ") + with_article(param_type_name(t));
    return false;
  }
  try {
    switch (t) {
      case ParamType::kInt: {
        const double d = n.as<double>();
        if (std::floor(d) != d || std::fabs(d) > 9.0e15) {
          err = "expected an integer, got '" + n.Scalar() + "'";
          return false;
        }
        return true;
      }
      case ParamType::kFloat: {
        const double d = n.as<double>();
        if (!std::isfinite(d)) {
          err = "expected a finite number, got '" + n.Scalar() + "'";
          return false;
        }
        return true;
      }
      case ParamType::kBool: (void)n.as<bool>(); return true;
      case ParamType::kString: return true;
      default: return false;
    }
  } catch (const YAML::Exception&) {
    err = std::string("expected ") + with_article(param_type_name(t)) + ", got '" + n.Scalar() + "'";
    return false;
  }
}

ParamType element_type(ParamType t) {
  switch (t) {
    case ParamType::kIntList: return ParamType::kInt;
    case ParamType::kFloatList: return ParamType::kFloat;
    case ParamType::kStringList: return ParamType::kString;
    default: return t;
  }
}

bool is_list(ParamType t) {
  return t == ParamType::kIntList || t == ParamType::kFloatList || t == ParamType::kStringList;
}

std::string fmt_num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Checks one scalar against type, bounds and choices; reports at `loc`.
bool check_scalar(const YAML::Node& n, const ParamSpec& spec, ParamType t, const SourceLocation& loc,
                  Diagnostics& diags) {
  std::string err;
  if (!parse_scalar(n, t, err)) {
    diags.error(loc, "'" + spec.name + "': " + err);
    return false;
  }
  if (t == ParamType::kInt || t == ParamType::kFloat) {
    const double d = n.as<double>();
    if (spec.min && d < *spec.min) {
      diags.error(loc, "'" + spec.name + "' must be >= " + fmt_num(*spec.min) + ", got " + n.Scalar());
      return false;
    }
    if (spec.max && d > *spec.max) {
      diags.error(loc, "'" + spec.name + "' must be <= " + fmt_num(*spec.max) + ", got " + n.Scalar());
      return false;
    }
    // An integer without a declared bound is held in 32 bits where it is used: past that it would
    // wrap (layers: 4294967298 ran 2 layers), so the range of the type is its bound.
    constexpr double kInt32Max = 2147483647.0;
    if (t == ParamType::kInt && ((!spec.max && d > kInt32Max) || (!spec.min && d < -kInt32Max - 1.0))) {
      diags.error(loc, "'" + spec.name + "' must be between -2147483648 and 2147483647 (the range of the integer "
                       "it is held in), got " + n.Scalar());
      return false;
    }
  }
  if (t == ParamType::kString && !spec.choices.empty()) {
    const std::string v = n.Scalar();
    bool ok = false;
    for (const auto& c : spec.choices) ok = ok || c == v;
    if (!ok) {
      diags.error(loc, "'" + spec.name + "': " + unknown_name_message("value", v, spec.choices));
      return false;
    }
  }
  return true;
}

}  // namespace

const ParamSet::Value& ParamSet::at(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw std::logic_error("parameter '" + name + "' was not declared");
  return it->second;
}

std::int64_t ParamSet::get_int(const std::string& name) const {
  return static_cast<std::int64_t>(at(name).node.as<double>());
}
double ParamSet::get_float(const std::string& name) const { return at(name).node.as<double>(); }
bool ParamSet::get_bool(const std::string& name) const { return at(name).node.as<bool>(); }
std::string ParamSet::get_string(const std::string& name) const { return at(name).node.as<std::string>(); }

std::vector<std::int64_t> ParamSet::get_int_list(const std::string& name) const {
  std::vector<std::int64_t> out;
  for (const auto& n : at(name).node) out.push_back(static_cast<std::int64_t>(n.as<double>()));
  return out;
}
std::vector<double> ParamSet::get_float_list(const std::string& name) const {
  std::vector<double> out;
  for (const auto& n : at(name).node) out.push_back(n.as<double>());
  return out;
}
std::vector<std::string> ParamSet::get_string_list(const std::string& name) const {
  std::vector<std::string> out;
  for (const auto& n : at(name).node) out.push_back(n.as<std::string>());
  return out;
}
bool ParamSet::given(const std::string& name) const { return at(name).given; }
SourceLocation ParamSet::where(const std::string& name) const { return at(name).where; }

YAML::Node ParamSet::to_yaml() const {
  YAML::Node out(YAML::NodeType::Map);
  for (const auto& [k, v] : values_) out[k] = YAML::Clone(v.node);
  return out;
}

ParamSet read_params(const YAML::Node& map, const std::vector<ParamSpec>& specs,
                     const SourceMap& sources, Diagnostics& diags,
                     const std::vector<std::string>& passthrough) {
  ParamSet out;
  const bool have_map = map && map.IsMap();
  if (map && !map.IsMap() && !map.IsNull()) {
    diags.error(sources.locate(map), "expected a mapping of options");
  }
  std::vector<std::string> known = passthrough;
  for (const auto& spec : specs) {
    known.push_back(spec.name);
    ParamSet::Value v;
    v.type = spec.type;
    const YAML::Node given = have_map ? map[spec.name] : YAML::Node();
    bool ok = false;
    if (have_map && given && given.IsNull() && spec.default_value == "~") {
      // An optional value's `key: ~` says "none", which is its default: as if the key were absent
      // (scenario.resolved.yaml writes unset optional values this way).
      v.node = YAML::Node();
      out.values_[spec.name] = std::move(v);
      continue;
    } else if (have_map && given && given.IsNull()) {
      report_null_value(given, spec.name, sources, diags);
      v.given = true;
      v.where = sources.locate(given);
    } else if (given && !given.IsNull()) {
      v.given = true;
      v.where = sources.locate(given);
      if (is_list(spec.type)) {
        YAML::Node list = given;
        if (given.IsScalar()) {  // a single value is a one-element list
          list = YAML::Node(YAML::NodeType::Sequence);
          list.push_back(given);
        }
        ok = list.IsSequence();
        if (!ok) diags.error(v.where, "'" + spec.name + "': expected " + with_article(param_type_name(spec.type)));
        for (std::size_t i = 0; ok && i < list.size(); ++i)
          ok = check_scalar(list[i], spec, element_type(spec.type), v.where, diags);
        if (ok) v.node = list;
      } else {
        ok = check_scalar(given, spec, spec.type, v.where, diags);
        if (ok) v.node = given;
      }
    } else if (spec.default_value.empty()) {
      diags.error(have_map ? sources.locate(map) : SourceLocation{sources.file(), 0, 0},
                  "missing required key '" + spec.name + "' (" + spec.help + ")");
    }
    if (!ok) {  // missing or bad: carry on with the default so later checks still run
      v.node = YAML::Load(!spec.default_value.empty() ? spec.default_value
                                                      : (is_list(spec.type) ? "[]" : "0"));
      // A bad value of an optional key (default "none") is reported above; afterwards the key is
      // absent, so code that reads given values never converts its null default.
      if (v.node.IsNull()) v.given = false;
    }
    out.values_[spec.name] = std::move(v);
  }
  if (have_map) reject_unknown_keys(map, known, sources, diags, "option");
  return out;
}

bool reject_unknown_keys(const YAML::Node& map, const std::vector<std::string>& known,
                         const SourceMap& sources, Diagnostics& diags, const std::string& what) {
  if (!map || !map.IsMap()) return true;
  bool ok = true;
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) {  // a complex key (`? {a: 1}`) names no option
      diags.error(sources.locate(kv.first), "a key must be a plain name, not a mapping or a list");
      ok = false;
      continue;
    }
    const std::string key = kv.first.Scalar();
    bool found = false;
    for (const auto& k : known) found = found || k == key;
    if (!found) {
      diags.error(sources.locate(kv.first), unknown_name_message(what, key, known));
      ok = false;
    }
  }
  return ok;
}

std::string describe_params(const std::vector<ParamSpec>& specs, const std::string& indent) {
  std::ostringstream os;
  for (const auto& s : specs) {
    os << indent << s.name << " (" << param_type_name(s.type);
    if (!s.default_value.empty()) os << ", default " << s.default_value;
    else os << ", required";
    if (!s.unit.empty()) os << ", " << s.unit;
    os << "): " << s.help;
    if (!s.choices.empty()) {
      os << " [";
      for (std::size_t i = 0; i < s.choices.size(); ++i) os << (i ? "|" : "") << s.choices[i];
      os << "]";
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace moesim
