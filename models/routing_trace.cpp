// The `trace` routing model: per-expert shares taken from real router counts, read from a CSV
// (`model,dataset,layer,expert,count`, as allenai/OLMoE's routing outputs decoded in
// shared/data/routing/olmoe_mixtral_expert_counts.csv) or from the JSON layout of
// switch_base_128_expert_counts.json (`expert_usage_by_layer: {layer: {expert: count}}`).
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/json_input.hpp"
#include "models/routing.hpp"

namespace moesim {
namespace {

/// Counts per (model, dataset) → layer → expert. JSON files have one unnamed model and dataset.
struct ExpertCounts {
  std::map<std::pair<std::string, std::string>, std::map<int, std::vector<double>>> table;
  bool named = true;  ///< false for JSON: no model/dataset columns
};

std::string trim(std::string s) {
  const auto ws = [](unsigned char c) { return std::isspace(c) != 0; };
  s.erase(s.begin(), std::find_if_not(s.begin(), s.end(), ws));
  s.erase(std::find_if_not(s.rbegin(), s.rend(), ws).base(), s.end());
  return s;
}

std::string join(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

void add_count(std::vector<double>& row, long long expert, double count) {
  if (row.size() <= static_cast<std::size_t>(expert)) row.resize(static_cast<std::size_t>(expert) + 1, 0.0);
  row[static_cast<std::size_t>(expert)] += count;
}

long long parse_number(const std::string& text, const std::string& what, const SourceLocation& loc) {
  try {
    std::size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw InputError(loc, "expected a non-negative integer " + what + ", got '" + text + "'");
}

ExpertCounts read_csv(std::istream& in, const std::string& path) {
  ExpertCounts out;
  std::string line;
  int line_no = 0;
  std::map<std::string, int> col;
  const char* needed[] = {"model", "dataset", "layer", "expert", "count"};
  while (std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty()) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(trim(cell));
    const SourceLocation loc{path, line_no, 1};
    if (col.empty()) {  // header
      for (std::size_t i = 0; i < cells.size(); ++i) col[cells[i]] = static_cast<int>(i);
      for (const char* c : needed)
        if (!col.count(c)) throw InputError(loc, std::string("routing trace header lacks column '") + c +
                                                     "' (expected model,dataset,layer,expert,count)");
      continue;
    }
    const auto cell = [&](const char* name) -> const std::string& {
      const auto i = static_cast<std::size_t>(col.at(name));
      if (i >= cells.size()) throw InputError(loc, std::string("routing trace row lacks column '") + name + "'");
      return cells[i];
    };
    const auto layer = parse_number(cell("layer"), "layer", loc);
    const auto expert = parse_number(cell("expert"), "expert id", loc);
    const auto count = parse_number(cell("count"), "count", loc);
    add_count(out.table[{cell("model"), cell("dataset")}][static_cast<int>(layer)], expert, static_cast<double>(count));
  }
  if (col.empty()) throw InputError(SourceLocation{path, 0, 0}, "routing trace is empty");
  return out;
}

ExpertCounts read_json(std::istream& in, const std::string& path) {
  const SourceLocation loc{path, 0, 0};
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = parse_json_input(text.str(), path, "malformed JSON routing trace");
  if (!j.is_object() || !j.contains("expert_usage_by_layer") || !j["expert_usage_by_layer"].is_object())
    throw InputError(loc, "JSON routing trace lacks an 'expert_usage_by_layer' object");
  ExpertCounts out;
  out.named = false;
  auto& layers = out.table[{"", ""}];
  for (const auto& [layer_key, experts] : j["expert_usage_by_layer"].items()) {
    const auto layer = parse_number(layer_key, "layer key", loc);
    auto& row = layers[static_cast<int>(layer)];
    if (!experts.is_object()) throw InputError(loc, "layer '" + layer_key + "' is not an {expert: count} object");
    for (const auto& [expert_key, count] : experts.items()) {
      if (!count.is_number() || count.get<double>() < 0)
        throw InputError(loc, "layer '" + layer_key + "', expert '" + expert_key + "': count is not a non-negative number");
      add_count(row, parse_number(expert_key, "expert key", loc), count.get<double>());
    }
    if (j.contains("num_experts") && j["num_experts"].is_number_integer())
      row.resize(std::max(row.size(), j["num_experts"].get<std::size_t>()), 0.0);
  }
  return out;
}

/// Does a trace's model column name the preset? ("mistral" is how OLMoE's scripts label Mixtral.)
bool names_model(const std::string& trace_model, const std::string& preset) {
  if (trace_model.empty()) return false;
  if (preset.rfind(trace_model, 0) == 0) return true;
  return trace_model == "mistral" && preset.rfind("mixtral", 0) == 0;
}

std::unique_ptr<RoutingModel> make_trace(const ParamSet& p, const RoutingContext& ctx, const SourceLocation& where) {
  const auto at = [&](const std::string& name) { return p.given(name) ? p.where(name) : where; };
  std::filesystem::path file(p.get_string("file"));
  if (file.is_relative() && !ctx.base_dir.empty()) file = std::filesystem::path(ctx.base_dir) / file;
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec))
    throw InputError(at("file"), "routing trace '" + file.string() + "' is a directory, not a CSV or JSON file");
  std::ifstream in(file);
  if (!in) throw InputError(at("file"), "cannot open routing trace '" + file.string() + "'");
  const bool json = in.peek() == '{' || file.extension() == ".json";
  const ExpertCounts counts = json ? read_json(in, file.string()) : read_csv(in, file.string());

  // Model: the one given, else the only one in the file, else the one the preset's name matches.
  std::set<std::string> models, datasets;
  for (const auto& [key, _] : counts.table) models.insert(key.first);
  std::string model = p.get_string("model");
  const std::string dataset = p.get_string("dataset");
  // Their defaults ("" and all) are what a JSON trace means, and what scenario.resolved.yaml writes.
  const bool model_named = p.given("model") && !model.empty(), dataset_named = p.given("dataset") && dataset != "all";
  if (!counts.named && (model_named || dataset_named))
    throw InputError(at(model_named ? "model" : "dataset"),
                     "'" + file.string() + "' is a JSON trace of one model and dataset; drop 'model' and 'dataset'");
  if (!p.given("model")) {
    bool found = models.size() == 1;
    if (found) model = *models.begin();
    for (const auto& m : models) {
      if (found || !names_model(m, ctx.model_name)) continue;
      model = m;
      found = true;
    }
    if (!found)
      throw InputError(where, "routing trace '" + file.string() + "' has no rows named for model '" + ctx.model_name +
                                  "'; choose one with 'model': " + join(models));
  } else if (!models.count(model)) {
    throw InputError(at("model"), "routing trace '" + file.string() + "' has no rows for model '" + model +
                                      "'; available: " + join(models));
  }

  // Sum the selected datasets ("all": every dataset of the model) per layer.
  std::map<int, std::vector<double>> layers;
  for (const auto& [key, per_layer] : counts.table) {
    if (key.first != model) continue;
    datasets.insert(key.second);
    if (dataset != "all" && key.second != dataset) continue;
    for (const auto& [layer, row] : per_layer) {
      auto& sum = layers[layer];
      if (sum.size() < row.size()) sum.resize(row.size(), 0.0);
      for (std::size_t e = 0; e < row.size(); ++e) sum[e] += row[e];
    }
  }
  if (layers.empty())
    throw InputError(at("dataset"), "routing trace '" + file.string() + "' has no rows for model '" + model +
                                        "' and dataset '" + dataset + "'; available: all, " + join(datasets));

  const auto want = p.get_int("layer");
  if (want >= 0) {
    auto it = layers.find(static_cast<int>(want));
    if (it == layers.end()) {
      std::set<std::string> ids;
      for (const auto& [l, _] : layers) ids.insert(std::to_string(l));
      throw InputError(at("layer"), "routing trace '" + file.string() + "' has no layer " + std::to_string(want) +
                                        " for model '" + model + "'; available: " + join(ids) + " (or -1 to cycle)");
    }
    layers = {*it};
  }

  std::vector<std::vector<double>> rows;
  for (auto& [layer, row] : layers) {
    const std::string which = "layer " + std::to_string(layer) + " of model '" + model + "' in '" + file.string() + "'";
    if (static_cast<int>(row.size()) != ctx.experts)
      throw InputError(at("file"), which + " has " + std::to_string(row.size()) + " experts, but the model has " +
                                       std::to_string(ctx.experts));
    if (std::all_of(row.begin(), row.end(), [](double c) { return c == 0.0; }))
      throw InputError(at("file"), which + " has no selections");
    rows.push_back(std::move(row));  // exact zeros stay zero: such experts are never selected
  }
  return std::make_unique<TableRoutingModel>(ctx, std::move(rows));
}

[[maybe_unused]] const bool kTrace = routing_models().add(
    "trace", "real per-expert counts from a routing trace (CSV model,dataset,layer,expert,count or JSON)",
    RoutingModelInfo{
        {ParamSpec{"file", ParamType::kString, "", "", "trace file, relative to the scenario's folder", {}, {}, {}},
         ParamSpec{"model", ParamType::kString, "\"\"", "",
                   "the trace's model column (default: the only one, or the one the preset is named after)", {}, {}, {}},
         ParamSpec{"dataset", ParamType::kString, "all", "", "the trace's dataset column; 'all' sums every dataset",
                   {}, {}, {}},
         ParamSpec{"layer", ParamType::kInt, "-1", "",
                   "the trace's layer; -1 cycles through its layers by MoE-layer index", -1.0, {}, {}}},
        make_trace});

}  // namespace
}  // namespace moesim
