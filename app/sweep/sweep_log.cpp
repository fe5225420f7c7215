// Reading a sweep directory back: its definition and its results log (see sweep_log.hpp).
#include "app/sweep/sweep_log.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/diagnostics.hpp"
#include "core/json_input.hpp"

namespace moesim {

namespace fs = std::filesystem;

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in || fs::is_directory(path)) throw InputError(SourceLocation{path, 0, 0}, "cannot read file");
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

namespace {

// What is wrong with a result line's runs or error, as results.csv reads them ("" if nothing):
// every run an object with a "metrics" object and string identity fields, an error's entries
// strings.
std::string malformed_runs(const nlohmann::json& line) {
  if (line.contains("error")) {
    for (const auto& d : line["error"])
      if (!d.is_string()) return "its 'error' entries must be strings";
    return "";
  }
  for (const auto& run : line["runs"]) {
    if (!run.is_object()) return "each run must be an object";
    if (!run.contains("metrics") || !run["metrics"].is_object()) return "a run without a 'metrics' object";
    for (const char* id : {"policy", "label", "predictor", "predictor_label"})
      if (run.contains(id) && !run[id].is_string()) return std::string("a run's '") + id + "' must be a string";
  }
  return "";
}

}  // namespace

nlohmann::json overrides_json(const SweepPoint& p) {
  nlohmann::json o = nlohmann::json::object();
  for (const auto& [k, v] : p.overrides) o[k] = v;
  return o;
}

ResultsLog read_results_log(const std::string& dir_name, const nlohmann::json& definition,
                            const std::vector<SweepPoint>& points, const std::string& refuse) {
  ResultsLog log;
  log.done.assign(points.size(), false);
  const fs::path dir(dir_name), def_path = dir / "sweep.json", jsonl = dir / "results.jsonl";
  if (!fs::exists(def_path)) {
    if (fs::exists(jsonl))
      throw InputError(SourceLocation{jsonl.string(), 0, 0}, "results.jsonl without sweep.json: not a sweep's" + refuse);
    return log;
  }
  const nlohmann::json stored = parse_json_or_discarded(read_text_file(def_path.string()));
  for (const char* field : {"file", "file_fnv1a", "grid", "zip", "set", "shard"}) {
    // "shard" is absent from an unsharded sweep's definition; every other field is always there.
    const bool required = std::string(field) != "shard";
    if (stored.is_discarded() || !stored.is_object() || (required && !stored.contains(field)) ||
        stored.value(field, nlohmann::json()) != definition.value(field, nlohmann::json()))
      throw InputError(SourceLocation{def_path.string(), 0, 0},
                       std::string("this directory holds a different sweep: its '") + field + "' differs" +
                           (std::string(field) == "file_fnv1a" ? " (the scenario file was edited)" : "") + refuse);
  }
  if (!fs::exists(jsonl)) return log;
  const std::string text = read_text_file(jsonl.string());
  int line_no = 0;
  for (std::size_t at = 0; at < text.size();) {
    ++line_no;
    const std::size_t nl = text.find('\n', at);
    if (nl == std::string::npos) break;  // truncated by an interruption
    const nlohmann::json j = parse_json_or_discarded(text.substr(at, nl - at));
    const bool last = nl + 1 == text.size();
    if (j.is_discarded() && last) break;
    const SourceLocation where{jsonl.string(), line_no, 1};
    if (j.is_discarded() || !j.is_object() || !j.contains("point") || !j["point"].is_number_unsigned())
      throw InputError(where, "not a sweep result line" + refuse);
    const auto p = j["point"].get<std::size_t>();
    if (p >= points.size() || j.value("overrides", nlohmann::json()) != overrides_json(points[p]) ||
        !(j.contains("runs") ? j["runs"].is_array() : j.contains("error") && j["error"].is_array()))
      throw InputError(where, "point " + std::to_string(p) + " does not belong to this sweep" + refuse);
    if (const std::string why = malformed_runs(j); !why.empty())
      throw InputError(where, "point " + std::to_string(p) + ": " + why + refuse);
    if (!log.done[p]) log.lines.push_back(j);
    log.done[p] = true;
    at = nl + 1;
    log.intact_bytes = at;
  }
  return log;
}

}  // namespace moesim
