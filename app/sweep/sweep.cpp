// The pure parts of `moesim sweep`: parsing axes and ranges, expanding points, the stored sweep
// definition and the CSV table. Running points lives in cli_sweep.cpp.
#include "app/sweep/sweep.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "core/diagnostics.hpp"

namespace moesim {
namespace {

// More values than this on one axis, or points in a sweep, is a typo (a step of 1e-9), not a plan.
constexpr std::size_t kMaxValues = 1'000'000;
constexpr std::size_t kMaxPoints = 10'000'000;

// Sweep-definition errors are located at the option that holds them, as --set's are.
[[noreturn]] void fail(const std::string& where, const std::string& message) {
  throw InputError(SourceLocation{where, 0, 0}, message);
}

// True when all of `s` is one number of type T (from_chars: no locale, no leading '+').
template <class T>
bool parse_whole(const std::string& s, T& out) {
  const char* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && ptr == end && !s.empty();
}

// Splits at commas outside brackets, braces and quotes, so YAML lists and maps stay one value.
std::vector<std::string> split_top_level(const std::string& s) {
  std::vector<std::string> parts(1);
  int depth = 0;
  char quote = 0;
  for (const char c : s) {
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 0) {
      parts.emplace_back();
      continue;
    }
    parts.back() += c;
  }
  return parts;
}


// Axes by key and expanded values: how a range was spelt does not change the sweep.
nlohmann::json axes_json(const std::vector<SweepAxis>& axes) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& x : axes) a.push_back({{"key", x.key}, {"values", x.values}});
  return a;
}

// A CSV cell: strings bare (then quoted by csv_field if needed), null empty.
std::string scalar_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  return v.dump();  // numbers print shortest round-trip, as in result.json
}

// Columns in first-seen order, with their index for lookups.
class Columns {
 public:
  std::size_t index(const std::string& name) {
    const auto [it, added] = index_.emplace(name, names_.size());
    if (added) names_.push_back(name);
    return it->second;
  }
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::vector<std::string> names_;
  std::map<std::string, std::size_t> index_;
};

// One CSV row: column index → cell; missing columns print empty.
using Row = std::map<std::size_t, std::string>;

// Every scalar under `j`, keyed by its dotted path; arrays (per-GPU, per-batch) are left out.
void flatten(const nlohmann::json& j, const std::string& prefix, Columns& cols, Row& row) {
  for (const auto& [k, v] : j.items()) {
    const std::string name = prefix.empty() ? k : prefix + "." + k;
    if (v.is_object()) flatten(v, name, cols, row);
    else if (!v.is_array()) row[cols.index(name)] = scalar_text(v);
  }
}

}  // namespace

std::vector<std::string> expand_range(const std::string& text, const std::string& where) {
  const std::vector<std::string> parts = [&] {
    std::vector<std::string> p(1);
    for (const char c : text) {
      if (c == ':') p.emplace_back();
      else p.back().push_back(c);
    }
    return p;
  }();
  if (parts.size() != 3) return {};
  std::int64_t a = 0, b = 0, st = 0;
  if (parse_whole(parts[0], a) && parse_whole(parts[1], b) && parse_whole(parts[2], st)) {
    if (st == 0 || (b != a && (b > a) != (st > 0))) fail(where, "range '" + text + "': the step never reaches stop");
    if (static_cast<std::uint64_t>((b - a) / st) >= kMaxValues) fail(where, "range '" + text + "' has too many values");
    std::vector<std::string> out;
    for (std::int64_t v = a; st > 0 ? v <= b : v >= b; v += st) out.push_back(std::to_string(v));
    return out;
  }
  double x = 0, y = 0, step = 0;
  if (!parse_whole(parts[0], x) || !parse_whole(parts[1], y) || !parse_whole(parts[2], step)) return {};
  const double steps = (y - x) / step;
  if (step == 0 || !std::isfinite(steps) || steps < -1e-9) fail(where, "range '" + text + "': the step never reaches stop");
  if (steps >= static_cast<double>(kMaxValues)) fail(where, "range '" + text + "' has too many values");
  // The tolerance keeps stop in when (stop - start) / step lands a hair under an integer.
  const auto n = static_cast<std::size_t>(std::floor(std::max(0.0, steps) + 1e-9)) + 1;
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(format_number(x + static_cast<double>(i) * step));
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (const char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.12g", v == 0.0 ? 0.0 : v);  // no "-0"
  return buf;
}

std::vector<std::string> parse_value_list(const std::string& text, const std::string& where) {
  std::vector<std::string> values;
  for (const std::string& v : split_top_level(text)) {
    if (v.empty()) fail(where, "empty value in the list");
    std::vector<std::string> range = expand_range(v, where);
    if (range.empty()) values.push_back(v);
    else values.insert(values.end(), range.begin(), range.end());
  }
  if (values.size() > kMaxValues) fail(where, "too many values");
  return values;
}

SweepAxis parse_sweep_axis(const std::string& option, const std::string& spec) {
  SweepAxis axis{option, spec, {}, {}};
  const std::string where = option + " " + spec;
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) fail(where, "expected key.path=v1,v2,... (or start:stop:step)");
  axis.key = spec.substr(0, eq);
  axis.values = parse_value_list(spec.substr(eq + 1), where);
  return axis;
}

std::vector<SweepPoint> expand_points(const SweepSpec& spec) {
  std::set<std::string> keys;
  for (const auto& s : spec.sets) keys.insert(s.substr(0, s.find('=')));
  std::vector<const SweepAxis*> all;
  for (const auto* axes : {&spec.grids, &spec.zips})
    for (const auto& a : *axes) {
      if (!keys.insert(a.key).second)
        fail(a.option + " " + a.spec, "key '" + a.key + "' is already swept or given with --set");
      all.push_back(&a);
    }
  for (const auto& z : spec.zips)
    if (z.values.size() != spec.zips.front().values.size())
      fail(z.option + " " + z.spec, "--zip lists must have equal lengths: '" + z.key + "' has " +
                                        std::to_string(z.values.size()) + " values, '" + spec.zips.front().key +
                                        "' has " + std::to_string(spec.zips.front().values.size()));
  // Dimension sizes: one per grid, then the zip lists as a single dimension.
  std::vector<std::size_t> dims;
  for (const auto& g : spec.grids) dims.push_back(g.values.size());
  if (!spec.zips.empty()) dims.push_back(spec.zips.front().values.size());
  std::size_t total = 1;
  for (const std::size_t d : dims) {
    if (d != 0 && total > kMaxPoints / d) fail(spec.file, "the sweep has more than 10,000,000 points");
    total *= d;
  }
  std::vector<SweepPoint> points(total);
  for (std::size_t i = 0; i < total; ++i) {
    SweepPoint& p = points[i];
    p.index = i;
    std::vector<std::size_t> at(dims.size());
    for (std::size_t d = dims.size(), rest = i; d-- > 0; rest /= dims[d]) at[d] = rest % dims[d];
    for (std::size_t g = 0; g < spec.grids.size(); ++g) p.overrides.emplace_back(spec.grids[g].key, spec.grids[g].values[at[g]]);
    for (const auto& z : spec.zips) p.overrides.emplace_back(z.key, z.values[at.back()]);
    p.axes = all;
  }
  return points;
}

std::vector<std::string> point_overrides(const SweepPoint& p) {
  std::vector<std::string> out;
  for (const auto& [k, v] : p.overrides) out.push_back(k + "=" + v);
  return out;
}

std::string fnv1a_hex(const std::string& text) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const unsigned char c : text) h = (h ^ c) * 0x100000001b3ULL;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

nlohmann::json sweep_definition(const SweepSpec& spec, const std::string& file_text, const SweepShard& shard) {
  nlohmann::json d = {{"file", std::filesystem::absolute(spec.file).lexically_normal().string()},
                      {"file_fnv1a", fnv1a_hex(file_text)},
                      {"grid", axes_json(spec.grids)},
                      {"zip", axes_json(spec.zips)},
                      {"set", spec.sets}};
  if (shard.count > 1) d["shard"] = shard.text();
  return d;
}

SweepShard parse_sweep_shard(const std::string& text) {
  const std::string where = "--shard " + text;
  const auto slash = text.find('/');
  SweepShard s;
  if (slash == std::string::npos || !parse_whole(text.substr(0, slash), s.index) ||
      !parse_whole(text.substr(slash + 1), s.count))
    fail(where, "expected K/N: run shard K (1 ... N) of N");
  if (s.count < 1 || s.count > kMaxValues) fail(where, "N must be 1 ... 1,000,000");
  if (s.index < 1 || s.index > s.count) fail(where, "K must be 1 ... N (" + std::to_string(s.count) + ")");
  return s;
}

SweepSpec sweep_spec_from_definition(const nlohmann::json& d, const std::string& where) {
  const auto bad = [&] { fail(where, "not a sweep definition (sweep.json of `moesim sweep`)"); };
  if (!d.is_object() || !d.contains("file") || !d["file"].is_string() || !d.contains("file_fnv1a") ||
      !d["file_fnv1a"].is_string() || !d.contains("set") || !d["set"].is_array())
    bad();
  SweepSpec spec{d["file"].get<std::string>(), {}, {}, {}};
  for (const auto& s : d["set"]) {
    if (!s.is_string()) bad();
    spec.sets.push_back(s.get<std::string>());
  }
  for (const auto& [field, option, axes] : {std::tuple{"grid", "--grid", &spec.grids}, std::tuple{"zip", "--zip", &spec.zips}}) {
    if (!d.contains(field) || !d[field].is_array()) bad();
    for (const auto& a : d[field]) {
      if (!a.is_object() || !a.contains("key") || !a["key"].is_string() || !a.contains("values") || !a["values"].is_array())
        bad();
      SweepAxis axis{option, "", a["key"].get<std::string>(), {}};
      for (const auto& v : a["values"]) {
        if (!v.is_string()) bad();
        axis.values.push_back(v.get<std::string>());
      }
      axis.spec = axis.key + "=";
      for (std::size_t i = 0; i < axis.values.size(); ++i) axis.spec += (i ? "," : "") + axis.values[i];
      axes->push_back(std::move(axis));
    }
  }
  return spec;
}

std::string sweep_csv(const SweepSpec& spec, std::vector<nlohmann::json> lines, std::size_t* rows_out) {
  std::stable_sort(lines.begin(), lines.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["point"].get<std::size_t>() < b["point"].get<std::size_t>();
  });
  Columns cols;
  cols.index("point");
  for (const auto* axes : {&spec.grids, &spec.zips})
    for (const auto& a : *axes) cols.index(a.key);
  for (const char* id : {"policy", "label", "predictor"}) cols.index(id);
  // Optional identity columns come before the metrics whichever line first has them.
  bool predictor_label = false, error = false;
  for (const auto& line : lines) {
    error = error || line.contains("error");
    for (const auto& run : line.value("runs", nlohmann::json::array())) predictor_label = predictor_label || run.contains("predictor_label");
  }
  if (predictor_label) cols.index("predictor_label");
  if (error) cols.index("error");

  std::vector<Row> rows;
  for (const auto& line : lines) {
    Row base;
    base[0] = scalar_text(line["point"]);
    for (const auto& [k, v] : line["overrides"].items()) base[cols.index(k)] = scalar_text(v);
    if (line.contains("error")) {
      std::string msg;
      for (const auto& d : line["error"]) msg += (msg.empty() ? "" : "\n") + d.get<std::string>();
      base[cols.index("error")] = msg;
      rows.push_back(base);
      continue;
    }
    for (const auto& run : line["runs"]) {
      Row row = base;
      for (const char* id : {"policy", "label", "predictor", "predictor_label"})
        if (run.contains(id)) row[cols.index(id)] = scalar_text(run[id]);
      flatten(run["metrics"], "", cols, row);
      rows.push_back(std::move(row));
    }
  }
  std::string csv;
  for (std::size_t c = 0; c < cols.names().size(); ++c) csv += (c ? "," : "") + csv_field(cols.names()[c]);
  csv += "\n";
  for (const Row& row : rows) {
    for (std::size_t c = 0; c < cols.names().size(); ++c) {
      if (c) csv += ',';
      if (const auto it = row.find(c); it != row.end()) csv += csv_field(it->second);
    }
    csv += "\n";
  }
  if (rows_out) *rows_out = rows.size();
  return csv;
}

}  // namespace moesim
