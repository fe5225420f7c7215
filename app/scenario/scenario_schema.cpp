// `moesim schema`: a JSON Schema (draft-07) of scenario files, generated from the sections of
// scenario_reference.hpp, so editors complete and check scenarios with what the loader accepts.
// Checked in as scenarios/moesim.schema.json; a test validates every shipped scenario with it.
//
// What the schema cannot say, the loader still checks (and locates): cross-key rules (a pool's
// GPUs against the cluster's, warm-up shorter than the run), files that must exist, a policy's own
// checks against the model. Every mapping rejects undeclared keys, as the loader does.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "app/scenario/scenario_reference.hpp"
#include "hardware/cluster.hpp"
#include "models/model_spec.hpp"
#include "models/routing.hpp"
#include "policies/policy.hpp"
#include "predictors/predictor.hpp"
#include "serving/engine_profile.hpp"

namespace moesim {
namespace {

using Json = nlohmann::ordered_json;

Json names_of(const std::vector<std::string>& names) {
  Json e = Json::array();
  for (const auto& n : names) e.push_back(n);
  return e;
}

Json scalar_schema(ParamType t, const std::vector<std::string>& choices, const std::optional<double>& min,
                   const std::optional<double>& max) {
  Json s;
  switch (t) {
    case ParamType::kInt:
    case ParamType::kIntList: s["type"] = "integer"; break;
    case ParamType::kFloat:
    case ParamType::kFloatList: s["type"] = "number"; break;
    case ParamType::kBool: s["type"] = "boolean"; break;
    case ParamType::kString:
    case ParamType::kStringList:
      // The loader reads any scalar as text (`data_parallel: 8`, `data_parallel: auto`).
      if (choices.empty()) s["type"] = Json::array({"string", "number", "boolean"});
      else s["enum"] = names_of(choices);
      break;
  }
  if (t != ParamType::kString && t != ParamType::kStringList && t != ParamType::kBool) {
    if (min) s["minimum"] = *min;
    if (max) s["maximum"] = *max;
  }
  return s;
}

// The declared default as JSON (editors offer it), when it reads as the key's type.
bool default_of(const ParamSpec& p, Json& out) {
  if (p.default_value.empty()) return false;
  if (p.default_value == "~") {
    out = nullptr;
    return true;
  }
  try {
    const YAML::Node n = YAML::Load(p.default_value);
    const auto one = [&](const YAML::Node& v) -> Json {
      switch (p.type) {
        case ParamType::kInt:
        case ParamType::kIntList: return v.as<long long>();
        case ParamType::kFloat:
        case ParamType::kFloatList: return v.as<double>();
        case ParamType::kBool: return v.as<bool>();
        default: return v.IsNull() ? std::string() : v.Scalar();
      }
    };
    if (n.IsSequence()) {
      out = Json::array();
      for (const auto& v : n) out.push_back(one(v));
    } else {
      out = one(n);
    }
    return true;
  } catch (const YAML::Exception&) {
    return false;
  }
}

Json value_schema(const ParamSpec& p) {
  const bool list = p.type == ParamType::kIntList || p.type == ParamType::kFloatList || p.type == ParamType::kStringList;
  Json s;
  s["description"] = p.help + (p.unit.empty() ? "" : " [" + p.unit + "]");
  if (list) {
    s["type"] = "array";
    s["items"] = scalar_schema(p.type, p.choices, p.min, p.max);
  } else {
    const Json scalar = scalar_schema(p.type, p.choices, p.min, p.max);
    for (const auto& [k, v] : scalar.items()) s[k] = v;
    if (p.default_value == "~") {  // absent by default; `key: ~` says so too
      if (s.contains("enum")) s["enum"].push_back(nullptr);
      else if (s["type"].is_array()) s["type"].push_back("null");
      else s["type"] = Json::array({s["type"], "null"});
    }
  }
  Json d;
  if (default_of(p, d)) s["default"] = d;
  return s;
}

Json object_of(const std::vector<ParamSpec>& keys) {
  Json s;
  s["type"] = "object";
  s["properties"] = Json::object();
  for (const ParamSpec& p : keys) s["properties"][p.name] = value_schema(p);
  s["additionalProperties"] = false;
  return s;
}

Json text(const std::string& description) { return Json{{"type", "string"}, {"description", description}}; }
Json name_list(const std::vector<std::string>& names, const std::string& description) {
  return Json{{"description", description}, {"enum", names_of(names)}};
}

/// The sections of one path, by variant ("" for a section without one).
using Sections = std::map<std::string, std::map<std::string, ScenarioSection>>;

// A mapping discriminated by `key` (one variant per section of `path`), or a bare name of one.
// `optional_for`: the variant the loader takes when the key is absent ("" if it must be given).
Json discriminated(const Sections& all, const std::string& path, const std::string& key, const std::string& optional_for,
                   const std::map<std::string, Json>& common) {
  Json any = Json::array();
  std::vector<std::string> names;
  for (const auto& [variant, sec] : all.at(path)) {
    if (variant.empty()) continue;
    const std::string name = variant.substr(key.size() + 2);  // "key: name"
    names.push_back(name);
    Json obj = object_of(sec.keys);
    Json props;
    props[key] = Json{{"const", name}};
    for (const auto& [k, v] : common) props[k] = v;
    for (auto& [k, v] : obj["properties"].items()) props[k] = v;
    obj["properties"] = props;
    if (name != optional_for) obj["required"] = Json::array({key});
    obj["description"] = sec.summary;
    any.push_back(obj);
  }
  Json bare = name_list(names, path + ": a " + key + " by name");
  any.insert(any.begin(), bare);
  return Json{{"anyOf", any}};
}

Json with_links(Json obj, const std::map<std::string, Json>& extra) {
  for (const auto& [k, v] : extra) obj["properties"][k] = v;
  return obj;
}

Json entries_schema(const Sections& all, const std::string& path) {
  const Json one = discriminated(all, path, "name", "", {{"label", text("its name in results and trace files")}});
  return Json{{"anyOf", Json::array({one, Json{{"type", "array"}, {"items", one}, {"minItems", 1}}})},
              {"description", all.at(path).at("").summary}};
}

}  // namespace

std::string scenario_schema_json() {
  Sections all;
  for (ScenarioSection& s : scenario_sections()) all[s.path][s.variant] = std::move(s);
  const auto& plain = [&](const std::string& path) { return object_of(all.at(path).at("").keys); };

  const Json attention = plain("model.attention");
  const Json model_map = with_links(plain("model"), {{"preset", name_list(model_presets().names(), "model preset")},
                                                     {"hf_config", text("a model's config.json, relative to the scenario")},
                                                     {"name", text("the model's name in results")},
                                                     {"attention", attention}});
  const Json gpu = Json{{"anyOf", Json::array({name_list(gpu_presets().names(), "GPU preset"),
                                               with_links(plain("hardware.gpu"),
                                                          {{"preset", name_list(gpu_presets().names(), "GPU preset")}})})}};
  const Json hardware_map =
      with_links(plain("hardware"), {{"preset", name_list(cluster_presets().names(), "cluster preset")},
                                     {"name", text("the cluster's name in results")},
                                     {"gpu", gpu},
                                     {"calibration", text("a hardware profile from `moesim calibrate fit`")}});
  const Json routing = discriminated(all, "workload.routing", "kind", "uniform",
                                     {{"draws", value_schema(all.at("workload.routing").at("").keys.at(0))}});
  const Json arrival = discriminated(all, "workload.arrival", "process", "", {});
  Json length = discriminated(all, "workload.length", "dist", "", {});
  length["anyOf"][0] = Json{{"type", "integer"}, {"minimum", 1}, {"description", "every request's length"}};

  Json prefill = with_links(object_of(all.at("workload").at("kind: prefill").keys), {{"routing", routing}});
  prefill["properties"]["kind"] = Json{{"const", "prefill"}};
  Json serving_wl = with_links(object_of(all.at("workload").at("kind: serving").keys),
                               {{"routing", routing}, {"arrival", arrival}, {"prompt_tokens", length}, {"output_tokens", length}});
  serving_wl["properties"]["kind"] = Json{{"const", "serving"}};
  serving_wl["required"] = Json::array({"kind"});

  const Json engine = Json{
      {"anyOf", Json::array({name_list(engine_profiles().names(), "serving engine"),
                             with_links(plain("serving.engine"),
                                        {{"preset", name_list(engine_profiles().names(), "serving engine")}})})}};
  const Json serving = with_links(plain("serving"), {{"engine", engine},
                                                     {"slo", plain("serving.slo")},
                                                     {"speculative", plain("serving.speculative")}});
  const Json deployment =
      with_links(plain("deployment"), {{"prefill", plain("deployment.pool")}, {"decode", plain("deployment.pool")}});

  Json root;
  root["$schema"] = "http://json-schema.org/draft-07/schema#";
  root["title"] = "moesim scenario";
  root["description"] =
      "Generated by `moesim schema` from the declarations the scenario loader validates against; do not edit.";
  root["type"] = "object";
  Json props = object_of(all.at("").at("").keys)["properties"];
  props["model"] = Json{{"anyOf", Json::array({name_list(model_presets().names(), "model preset"), model_map})}};
  props["hardware"] = Json{{"anyOf", Json::array({name_list(cluster_presets().names(), "cluster preset"), hardware_map})}};
  props["workload"] = Json{{"anyOf", Json::array({prefill, serving_wl})}};
  props["serving"] = serving;
  props["deployment"] = deployment;
  props["policy"] = entries_schema(all, "policy");
  props["predictor"] = entries_schema(all, "predictor");
  props["output"] = plain("output");
  root["properties"] = props;
  root["required"] = Json::array({"model", "hardware"});
  root["additionalProperties"] = false;
  return root.dump(2) + "\n";
}

}  // namespace moesim
