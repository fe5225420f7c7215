// `moesim compare` (compare.hpp): loads each result, flattens its runs' scalar metrics to dotted
// paths (as `moesim sweep` names its CSV columns) and prints them with ratios to the first run.
#include "app/cli/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "app/sweep/sweep.hpp"
#include "app/sweep/sweep_log.hpp"
#include "core/diagnostics.hpp"
#include "core/json_input.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;

// One run of one result file: where it came from and its metrics by dotted path.
struct Run {
  std::string result;  ///< the result's name: its folder (results/<name>/result.json) or file stem
  std::string policy, label, predictor, predictor_label;
  std::map<std::string, nlohmann::json> metrics;  ///< scalars only
  std::map<std::string, bool> groups;             ///< paths of objects and arrays (not comparable)
};

void flatten(const nlohmann::json& j, const std::string& prefix, Run& run) {
  for (const auto& [k, v] : j.items()) {
    const std::string name = prefix.empty() ? k : prefix + "." + k;
    if (v.is_object()) {
      run.groups[name] = true;
      flatten(v, name, run);
    } else if (v.is_array()) {
      run.groups[name] = true;
    } else {
      run.metrics[name] = v;
    }
  }
}

std::vector<Run> load_runs(const std::string& given) {
  const std::string file = fs::is_directory(given) ? (fs::path(given) / "result.json").string() : given;
  const std::string text = read_text_file(file);
  const nlohmann::json j = parse_json_input(text, file, "not JSON");
  if (!j.is_object() || !j.contains("runs") || !j["runs"].is_array() || j["runs"].empty())
    throw InputError(SourceLocation{file, 1, 1}, "not a moesim result: no \"runs\" (write one with `moesim run`)");
  const fs::path path(file);
  const std::string name = path.filename() == "result.json" && path.has_parent_path()
                               ? path.parent_path().filename().string()
                               : path.stem().string();
  std::vector<Run> runs;
  for (const auto& r : j["runs"]) {
    if (!r.is_object() || !r.contains("metrics") || !r["metrics"].is_object())
      throw InputError(SourceLocation{file, 1, 1}, "not a moesim result: a run without \"metrics\"");
    for (const char* id : {"policy", "label", "predictor", "predictor_label"})
      if (r.contains(id) && !r[id].is_string())  // value() would throw nlohmann's type_error
        throw InputError(SourceLocation{file, 1, 1},
                         std::string("not a moesim result: a run's \"") + id + "\" must be a string");
    Run run{name, r.value("policy", ""), r.value("label", ""), r.value("predictor", ""), r.value("predictor_label", ""), {}, {}};
    flatten(r["metrics"], "", run);
    runs.push_back(std::move(run));
  }
  return runs;
}

// The row's name: result/label, with the predictor when it is not "none".
std::string run_name(const Run& r) {
  std::string n = r.result + "/" + r.label;
  if (!r.predictor_label.empty() && r.predictor_label != "none") n += "/" + r.predictor_label;
  return n;
}

std::optional<double> number(const Run& r, const std::string& metric) {
  const auto it = r.metrics.find(metric);
  if (it == r.metrics.end() || !it->second.is_number()) return std::nullopt;
  return it->second.get<double>();
}

// A value as the table prints it: 4 significant digits, plain notation for ordinary magnitudes.
std::string shown(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string ratio_text(const std::optional<double>& v, const std::optional<double>& base) {
  if (!v || !base || *base == 0.0) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", *v / *base);
  return buf;
}

// Checks each asked-for metric against what the runs have; lists the valid names on a miss.
std::vector<std::string> chosen_metrics(const CompareOptions& o, const std::vector<Run>& runs) {
  std::map<std::string, bool> scalars, groups;
  for (const Run& r : runs) {
    for (const auto& [k, v] : r.metrics)
      if (v.is_number()) scalars[k] = true;
    for (const auto& [k, v] : r.groups) groups[k] = v;
  }
  if (o.metrics.empty()) {
    std::vector<std::string> out;
    for (const auto& m : default_compare_metrics())
      if (scalars.count(m)) out.push_back(m);
    return out;
  }
  std::vector<Diagnostic> problems;
  for (const auto& m : o.metrics) {
    if (scalars.count(m)) continue;
    const SourceLocation where{"--metric " + m, 0, 0};
    if (groups.count(m)) {
      std::string members;
      for (const auto& [k, v] : scalars)
        if (k.rfind(m + ".", 0) == 0) members += (members.empty() ? "" : ", ") + k;
      problems.push_back({where, "'" + m + "' is a group of metrics" +
                                     (members.empty() ? " (an array: not compared)" : "; choose one of: " + members)});
    } else if (std::any_of(runs.begin(), runs.end(), [&](const Run& r) { return r.metrics.count(m) != 0; })) {
      problems.push_back({where, "'" + m + "' is not a number (compare takes numeric metrics)"});
    } else {
      std::string all;
      for (const auto& [k, v] : scalars) all += (all.empty() ? "" : ", ") + k;
      problems.push_back({where, "no run has metric '" + m + "'; metrics: " + all});
    }
  }
  if (!problems.empty()) throw InputError(std::move(problems));
  return o.metrics;
}

}  // namespace

const std::vector<std::string>& default_compare_metrics() {
  static const std::vector<std::string> metrics = {
      "makespan_ms",    "layer_latency_ms.mean", "ttft_ms.mean",           "ttft_ms.p99", "tpot_ms.mean",
      "itl_ms.p99",     "e2e_ms.mean",           "throughput_tokens_per_s", "request_rate_per_s",
      "load.gpu_max_over_mean", "bytes.inter_node"};
  return metrics;
}

void compare_results(const CompareOptions& o, std::ostream& os) {
  std::vector<Run> runs;
  for (const auto& f : o.files) {
    std::vector<Run> r = load_runs(f);
    runs.insert(runs.end(), std::make_move_iterator(r.begin()), std::make_move_iterator(r.end()));
  }
  const std::vector<std::string> metrics = chosen_metrics(o, runs);
  const Run& first = runs.front();
  if (o.csv) {
    os << "result,policy,label,predictor,predictor_label";
    for (const auto& m : metrics) os << "," << csv_field(m) << "," << csv_field(m + ".vs_first");
    os << "\n";
    for (const Run& r : runs) {
      os << csv_field(r.result) << "," << csv_field(r.policy) << "," << csv_field(r.label) << "," << csv_field(r.predictor)
         << "," << csv_field(r.predictor_label);
      for (const auto& m : metrics) {
        const auto it = r.metrics.find(m);
        const std::string cell = it == r.metrics.end() ? ""
                                 : it->second.is_string() ? it->second.get<std::string>()
                                                          : it->second.dump();
        os << "," << csv_field(cell) << "," << ratio_text(number(r, m), number(first, m));
      }
      os << "\n";
    }
    return;
  }
  // Text: runs side by side, one column each (named by its number, listed above the table), one
  // row per metric; after the first run each value carries its ratio to the first's.
  for (std::size_t i = 0; i < runs.size(); ++i) os << "[" << i + 1 << "] " << run_name(runs[i]) << "\n";
  os << "\n";
  std::vector<std::string> head = {"metric"};
  for (std::size_t i = 0; i < runs.size(); ++i) head.push_back("[" + std::to_string(i + 1) + "]");
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : metrics) {
    std::vector<std::string> row = {m};
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const auto v = number(runs[i], m);
      const std::string ratio = i == 0 ? "" : ratio_text(v, number(first, m));
      row.push_back((v ? shown(*v) : "-") + (ratio.empty() ? "" : " (" + ratio + "x)"));
    }
    rows.push_back(std::move(row));
  }
  std::vector<std::size_t> width(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  const auto line = [&](const std::vector<std::string>& cells) {
    for (std::size_t c = 0; c < cells.size(); ++c) {
      if (c == 0) os << std::left;
      else os << std::right;
      os << std::setw(static_cast<int>(width[c])) << cells[c] << (c + 1 < cells.size() ? "  " : "\n");
    }
  };
  line(head);
  for (const auto& row : rows) line(row);
}

}  // namespace moesim
