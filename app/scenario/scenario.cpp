#include "app/scenario/scenario.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "app/scenario/scenario_keys.hpp"
#include "app/scenario/scenario_sections.hpp"
#include "app/scenario/scenario_serving.hpp"
#include "core/yaml_input.hpp"
#include "models/routing.hpp"
#include "policies/deepep_dispatch.hpp"
#include "policies/policy.hpp"
#include "predictors/predictor.hpp"

namespace moesim {
namespace {

// Applies "a.b.0.c=value": maps are created as needed; sequence indices must exist.
void apply_override(YAML::Node& root, const std::string& spec, SourceMap& src, Diagnostics& diags) {
  const SourceLocation where{"--set " + spec, 0, 0};
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) {
    diags.error(where, "expected key.path=value");
    return;
  }
  const std::string path = spec.substr(0, eq);
  YAML::Node value;
  try {
    value = load_yaml_input(spec.substr(eq + 1), where.file, "value is not valid YAML");
  } catch (const InputError& e) {
    diags.error(where, e.diagnostics().front().message);
    return;
  }
  if (spec.find_first_not_of(" \t", eq + 1) == std::string::npos) {
    // `--set key=` would silently fall back to the default (an explicit `key=~` clears a key that
    // takes none, e.g. hardware.calibration).
    diags.error(where, "no value after '=': give one (a key's default applies when the key is left out)");
    return;
  }
  std::vector<std::string> keys;
  std::stringstream ss(path);
  for (std::string k; std::getline(ss, k, '.');) keys.push_back(k);
  YAML::Node cur = root;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::string& k = keys[i];
    const bool last = i + 1 == keys.size();
    if (cur.IsSequence()) {
      std::size_t idx = 0;
      try {
        idx = std::stoul(k);
      } catch (...) {
        diags.error(where, "'" + k + "' is not an index into a list");
        return;
      }
      if (idx >= cur.size()) {
        diags.error(where, "index " + k + " is past the end of the list");
        return;
      }
      if (last) {
        cur[idx] = value;
        src.add_override(cur[idx], "--set " + spec);
        return;
      }
      cur.reset(cur[idx]);
      continue;
    }
    if (cur.IsScalar()) {
      // `model: mixtral-8x7b` overridden at `model.layers`: the scalar becomes {preset: ...};
      // a policy or predictor name (`predictor.accuracy`, `policy.1.placement`) becomes {name: ...}.
      const bool entry = keys[0] == "policy" || keys[0] == "predictor";
      YAML::Node m(YAML::NodeType::Map);
      m[entry ? "name" : "preset"] = cur.Scalar();
      cur = m;  // assignment (not reset): replaces the scalar inside the tree
    }
    const bool fresh = !cur[k];
    if (last) cur[k] = value;
    else if (!cur[k] || cur[k].IsNull()) cur[k] = YAML::Node(YAML::NodeType::Map);
    if (fresh)  // a key the file lacks: problems with it are the --set's (e.g. a misspelt path)
      for (auto it = cur.begin(); it != cur.end(); ++it)
        if (it->first.IsScalar() && it->first.Scalar() == k) src.add_override(it->first, "--set " + spec);
    if (last) {
      src.add_override(cur[k], "--set " + spec);
      return;
    }
    cur.reset(cur[k]);
  }
}

/// yaml-cpp keeps a mapping's repeated key and reads its first value: a silent surprise. Every
/// repeat is a located error instead.
void report_duplicate_keys(const YAML::Node& node, const SourceMap& src, Diagnostics& diags) {
  if (node.IsSequence()) {
    for (const auto& item : node) report_duplicate_keys(item, src, diags);
    return;
  }
  if (!node.IsMap()) return;
  std::map<std::string, YAML::Mark> seen;
  for (const auto& kv : node) {
    if (kv.first.IsScalar()) {
      const auto [it, fresh] = seen.emplace(kv.first.Scalar(), kv.first.Mark());
      if (!fresh)
        diags.error(src.locate(kv.first), "duplicate key '" + kv.first.Scalar() + "' (first at line " +
                                              std::to_string(it->second.line + 1) + "): only one is kept");
    } else {
      // YAML's complex keys (`? {a: 1}`): no scenario key is a mapping or a list.
      diags.error(src.locate(kv.first), "a key must be a plain name, not a mapping or a list");
    }
    report_duplicate_keys(kv.second, src, diags);
  }
}

SourceLocation loc(const SourceMap& src, const YAML::Node& n, const YAML::Node& parent) {
  return n ? src.locate(n) : src.locate(parent);
}

void read_routing(const YAML::Node& node, const YAML::Node& parent, Scenario& s, const SourceMap& src,
                  Diagnostics& diags, YAML::Node& resolved) {
  report_null_value(node, "routing", src, diags);
  const bool given = node.IsDefined() && !node.IsNull();
  // A fresh node: `node` may be a zombie (missing key), which cannot be re-bound.
  YAML::Node map(YAML::NodeType::Map);
  if (given && node.IsMap()) {
    map.reset(node);
  } else if (given && node.IsScalar()) {  // `routing: uniform`
    map["kind"] = node;
  } else {
    if (given) diags.error(src.locate(node), "'routing' must be a name or a mapping with 'kind'");
    map["kind"] = "uniform";
  }
  const YAML::Node kind = map["kind"];
  s.routing.kind = kind ? kind.as<std::string>() : "uniform";
  s.routing.where = loc(src, kind, given ? node : parent);
  const auto* entry = routing_models().find(s.routing.kind);
  if (!entry) {
    diags.error(s.routing.where, unknown_name_message("routing model", s.routing.kind, routing_models().names()));
    return;
  }
  s.routing.params = read_params(map, entry->value.params, src, diags, {"kind", "draws"});
  std::vector<std::string> routing_keys{"kind"};
  for (const ParamSpec& p : entry->value.params) routing_keys.push_back(p.name);
  const ParamSet draws = read_params(
      map,
      routing_draws_specs(),
      src, diags, routing_keys);
  s.routing.token_draws = draws.get_string("draws") == "tokens";
  resolved = s.routing.params.to_yaml();
  resolved["kind"] = s.routing.kind;
  // File references resolve to absolute paths, so scenario.resolved.yaml re-runs from anywhere.
  if (resolved["file"] && resolved["file"].IsScalar() && !resolved["file"].Scalar().empty())
    resolved["file"] = std::filesystem::absolute(std::filesystem::path(s.base_dir) / resolved["file"].Scalar())
                           .lexically_normal()
                           .string();
  resolved["draws"] = draws.get_string("draws");
}

// An option's resolved value as one line of YAML (lists in flow style), for automatic labels.
std::string value_text(const YAML::Node& v) {
  if (v.IsScalar()) return v.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << v;
  return out.c_str();
}

// Labels unlabeled entries that share a name by the options that tell them apart: "name" plus
// "-key=value" for each declared option (in declaration order) whose values differ among them.
void label_by_options(std::vector<PluginEntry>& entries, const std::vector<char>& unlabeled,
                      const std::vector<std::vector<ParamSpec>>& specs) {
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!unlabeled[i]) continue;
    std::vector<std::size_t> group;
    for (std::size_t j = 0; j < entries.size(); ++j)
      if (unlabeled[j] && entries[j].name == entries[i].name) group.push_back(j);
    if (group.size() < 2) continue;
    std::string label = entries[i].name;
    for (const ParamSpec& spec : specs[i]) {
      const std::string mine = value_text(entries[i].params.to_yaml()[spec.name]);
      const bool differs = std::any_of(group.begin(), group.end(), [&](std::size_t j) {
        return value_text(entries[j].params.to_yaml()[spec.name]) != mine;
      });
      if (differs) label += "-" + spec.name + "=" + mine;
    }
    entries[i].label = label;
  }
}

// Reads a `policy:` or `predictor:` list (one entry is a one-element list; absent means
// `default_name`): names or mappings {name, label, <options>}, options validated against the
// registry's declarations, labels unique. The resolved list spells out every option.
template <typename Info>
std::vector<PluginEntry> read_entries(const YAML::Node& node, const YAML::Node& root, const Registry<Info>& reg,
                                      const std::string& default_name, const SourceMap& src, Diagnostics& diags,
                                      YAML::Node& resolved) {
  const std::string& family = reg.family();
  YAML::Node list = node;
  if (!node) {
    list.reset(YAML::Node(YAML::NodeType::Sequence));
    list.push_back(default_name);
  } else if (!node.IsSequence()) {
    list.reset(YAML::Node(YAML::NodeType::Sequence));
    list.push_back(node);
  }
  std::vector<PluginEntry> entries;
  std::vector<char> unlabeled;
  std::vector<std::vector<ParamSpec>> specs;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    PluginEntry e;
    e.where = loc(src, item, root);
    YAML::Node opts;
    if (item.IsScalar()) {
      e.name = item.Scalar();
    } else if (item.IsMap() && item["name"] && item["name"].IsScalar()) {
      e.name = item["name"].Scalar();
      opts.reset(item);
    } else {
      diags.error(e.where, "a " + family + " entry is a name or a mapping with 'name'");
      continue;
    }
    const auto* info = reg.find(e.name);
    if (!info) {
      diags.error(item.IsMap() ? src.locate(item["name"]) : e.where, unknown_name_message(family, e.name, reg.names()));
      continue;
    }
    e.params = read_params(opts, info->value.params, src, diags, {"name", "label"});
    const YAML::Node label = opts ? opts["label"] : YAML::Node();
    e.label = e.name;
    if (label && (!label.IsScalar() || label.Scalar().empty() || label.Scalar().find('/') != std::string::npos))
      diags.error(src.locate(label), "'label' must be a non-empty name without '/' (it names trace files)");
    else if (label)
      e.label = label.Scalar();
    unlabeled.push_back(label ? 0 : 1);
    specs.push_back(info->value.params);
    entries.push_back(std::move(e));
  }
  label_by_options(entries, unlabeled, specs);
  resolved = YAML::Node(YAML::NodeType::Sequence);
  std::set<std::string> labels;
  for (const PluginEntry& e : entries) {
    if (!labels.insert(e.label).second)
      diags.error(e.where, "duplicate " + family + " label '" + e.label + "' (give each entry a distinct 'label')");
    YAML::Node r = e.params.to_yaml();
    r["name"] = e.name;
    r["label"] = e.label;
    resolved.push_back(r);
  }
  if (entries.empty() && diags.empty()) diags.error(loc(src, node, root), "no " + family + " to run");
  return entries;
}

// What each policy declares it supports (PolicyCapabilities) against the workload, the deployment
// and the predictors: the checks no policy's own `check` can make, since it sees only its options,
// the model and the cluster.
void check_capabilities(const Scenario& s, bool serving, Diagnostics& diags) {
  const DeploymentConfig& d = s.deployment;
  // Without expert parallelism every expert is tensor-parallel inside its attention group: only
  // the policies that lay experts out that way run there.
  const bool no_ep = serving && (d.disaggregated() ? !d.prefill.expert_parallel || !d.decode.expert_parallel
                                                   : !d.colocated.expert_parallel);
  std::string without_ep;
  for (const auto* p : policies().entries())
    if (!p->value.supports.expert_parallel && p->value.supports.stepped)
      without_ep += (without_ep.empty() ? "" : " or ") + p->name;
  for (const PluginEntry& e : s.policies) {
    const PolicyCapabilities& can = policies().get(e.name).value.supports;
    const std::string policy = "policy '" + e.name + "'";
    if (no_ep && can.expert_parallel)
      diags.error(e.where, policy + " needs expert parallelism, but deployment.expert_parallel is false " +
                               "(every expert tensor-parallel inside its attention group): use policy " + without_ep +
                               ", or set expert_parallel: true");
    if (!can.prefill && !serving)
      diags.error(e.where, policy + " runs on serving workloads only (workload.kind: serving)");
    else if (d.attention_expert_split() && can.stepped)
      diags.error(e.where, policy + " plans steps, but deployment.attention_gpus splits attention from the experts, "
                                    "which the serving engine runs in layer-queue mode: use policy amoe (its "
                                    "scheduler, or micro_batches for ping-pong)");
    else if (d.attention_expert_split() && e.params.given("attention_gpus") && e.params.get_int("attention_gpus") != 0)
      diags.error(e.where, policy + ": the split is given twice, by deployment.attention_gpus and by the policy's "
                                    "attention_gpus: keep one");
    else if (!can.own_layout.empty() && d.disaggregated())
      diags.error(e.where, policy + " splits the GPUs itself (" + can.own_layout + "); remove deployment.prefill_gpus");
    else if (!can.own_layout.empty() &&
             (d.colocated.tensor_parallel != 1 || !d.colocated.expert_parallel || d.colocated.instances != 1))
      diags.error(e.where, policy + " splits the GPUs itself (" + can.own_layout +
                               "): remove deployment.tensor_parallel, expert_parallel and instances (one instance, "
                               "attention data-parallel)");
    if (!can.predictors)
      for (const PluginEntry& p : s.predictors)
        if (p.name != "none") diags.error(p.where, policy + " uses no expert-load predictor: use predictor: none");
    if (!can.stepped && serving && s.serving.layer_sampling > 1)
      diags.error(e.where, policy + " runs in the serving engine's layer-queue mode, which executes every layer: "
                                    "serving.layer_sampling must be 1");
  }
}

// `workload:` of kind prefill (all but `routing`), and no serving-only sections beside it.
void read_prefill_workload(const YAML::Node& root, Scenario& s, const SourceMap& src, Diagnostics& diags, bool cluster_ok,
                           YAML::Node& wl_res) {
  const YAML::Node wl = root["workload"];
  if (!wl)
    s.warnings.push_back(Diagnostic{SourceLocation{src.file(), 0, 0},
                                    "no 'workload' section: the prefill defaults apply (see `workload:` in docs/guide.md)",
                                    true});
  const ParamSet w = read_params(wl, prefill_workload_specs(), src, diags, {"routing"});
  s.workload.batch_size = w.get_int("batch_size");
  s.workload.seq_len = w.get_int("seq_len");
  s.workload.batches = w.get_int("batches");
  s.workload.warmup_batches = w.get_int("warmup_batches");
  s.workload.tensor_parallel_attention = w.get_string("attention_parallelism") == "tensor";
  const int gpus = s.hardware.num_gpus();
  if (s.workload.tensor_parallel_attention && cluster_ok && gpus > 0 && s.model.attention.heads % gpus != 0)
    diags.error(w.where("attention_parallelism"),
                "tensor-parallel attention splits the heads over the GPUs: " +
                    std::to_string(s.model.attention.heads) + " heads do not divide by " + std::to_string(gpus) +
                    " GPUs");
  if (s.workload.warmup_batches >= s.workload.batches && wl && wl.IsMap())
    diags.error(src.locate(wl["warmup_batches"] ? wl["warmup_batches"] : wl),
                "'warmup_batches' (" + std::to_string(s.workload.warmup_batches) +
                    ") must be fewer than 'batches' (" + std::to_string(s.workload.batches) + "): nothing would be measured");
  wl_res = w.to_yaml();
  // `serving:` and `deployment:` configure request-level serving only.
  for (const auto& kv : root)
    if (kv.first.IsScalar() && (kv.first.Scalar() == "serving" || kv.first.Scalar() == "deployment"))
      diags.error(src.locate(kv.first), "'" + kv.first.Scalar() +
                                            "' is only allowed with workload.kind: serving (this workload is prefill)");
}

// Each policy's own check of its options against this model and cluster (PolicyInfo::check).
void check_policies(Scenario& s, Diagnostics& diags) {
  for (const PluginEntry& e : s.policies) {
    const auto* entry = policies().find(e.name);
    if (!entry || !entry->value.check || !diags.empty()) continue;
    PolicyCheck found;
    entry->value.check(e.params, s.model, s.hardware, found);
    const auto at = [&](const std::string& option) { return !option.empty() && e.params.given(option) ? e.params.where(option) : e.where; };
    for (const auto& item : found.errors) diags.error(at(item.option), e.name + ": " + item.message);
    for (const auto& item : found.warnings) s.warnings.push_back(Diagnostic{at(item.option), e.name + ": " + item.message, true});
  }
}

// DeepEP carries the token dispatch of expert-parallel policies; it must be able to run on the
// pools' GPUs (RDMA NICs across nodes, DeepEP's 8-GPU nodes for its internode kernels).
void check_deepep(const Scenario& s, Diagnostics& diags) {
  for (const PluginEntry& e : s.policies) {
    const PolicyInfo& info = policies().get(e.name).value;
    const auto made = info.supports.stepped ? info.make(e.params) : nullptr;
    if (!dynamic_cast<const ExpertParallelPolicy*>(made.get()))
      diags.error(e.where, "deployment.alltoall " + std::string(moe_all_to_all_name(s.deployment.alltoall)) +
                               " carries an expert-parallel policy's dispatch; policy '" + e.name +
                               "' runs its own collectives (use alltoall: nccl)");
  }
  const DeploymentConfig& d = s.deployment;
  const int gpus = d.disaggregated() ? std::max(d.prefill_gpus, d.decode_gpus)
                                     : d.colocated.gpus_per_instance();
  try {
    const Cluster cluster(s.hardware);
    deepep_cost(cluster, deepep_params(s.model, d.alltoall, std::min(gpus, cluster.num_gpus()), DeepEpOp::kDispatch));
  } catch (const InputError& e) {
    for (const auto& x : e.diagnostics())
      diags.error(s.deployment_where, "deployment.alltoall " + std::string(moe_all_to_all_name(d.alltoall)) + ": " + x.message);
  }
}

Scenario build(YAML::Node root, SourceMap& src, const std::vector<std::string>& overrides,
               const std::string& base_dir) {
  Diagnostics diags;
  if (!root || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) throw InputError(src.locate(root), "a scenario must be a mapping of keys");
  for (const auto& o : overrides) apply_override(root, o, src, diags);
  diags.throw_if_any();

  Scenario s;
  s.file = src.file();
  s.base_dir = base_dir;
  YAML::Node res(YAML::NodeType::Map);

  const ParamSet top = read_params(
      root,
      top_level_specs(), src, diags, top_level_sections());
  s.name = top.get_string("name");
  s.seed = static_cast<std::uint64_t>(top.get_int("seed"));
  if (s.name.empty() || s.name.find('/') != std::string::npos || s.name == "." || s.name == "..")
    diags.error(top.where("name"), "'name' must be a non-empty file name (no '/')");
  res["name"] = s.name;
  res["seed"] = s.seed;

  s.model_where = loc(src, root["model"], root);
  YAML::Node model_res, hw_res, wl_res, routing_res, pol_res, pred_res;
  if (!root["model"]) diags.error(s.model_where, "missing required key 'model' (a preset name or a mapping)");
  else s.model = read_model_section(root["model"], src, diags, model_res, base_dir, &s.warnings);
  s.hardware_where = loc(src, root["hardware"], root);
  const std::size_t errors_before_hardware = diags.items().size();
  if (!root["hardware"]) diags.error(s.hardware_where, "missing required key 'hardware' (a preset name or a mapping)");
  else s.hardware = read_hardware_section(root["hardware"], src, diags, hw_res, base_dir);
  const bool cluster_ok = diags.items().size() == errors_before_hardware;
  s.hardware.fp8_block_scales = s.model.fp8_block_scales;  // which FP8 kernels the GEMMs run

  const YAML::Node wl = root["workload"];
  const bool serving = wl && wl.IsMap() && wl["kind"] && wl["kind"].IsScalar() && wl["kind"].Scalar() == "serving";
  YAML::Node serving_res, deployment_res;
  if (serving) {
    s.workload_kind = WorkloadKind::kServing;
    read_serving_sections(root, s, src, diags, cluster_ok, wl_res, serving_res, deployment_res);
    // The kernels the engine runs price the GEMMs (hardware.calibration's fits per engine).
    // Their tensor-parallel all-reduces run the engines' custom kernels within a node.
    if (const std::string& kernels = s.serving.engine.kernels; !kernels.empty()) {
      s.hardware.kernel_engine = kernels;
      s.hardware.custom_all_reduce = true;
    }
  } else {
    read_prefill_workload(root, s, src, diags, cluster_ok, wl_res);
  }
  read_routing(wl && wl.IsMap() ? wl["routing"] : YAML::Node(), wl ? wl : root, s, src, diags, routing_res);
  wl_res["routing"] = routing_res;

  s.policies = read_entries(root["policy"], root, policies(), "static-ep", src, diags, pol_res);
  s.predictors = read_entries(root["predictor"], root, predictors(), "none", src, diags, pred_res);
  // A dtype the GPU has no tensor cores for is priced at the GPU's fp32 rate (e.g. weight-only
  // fp8 on A100 dequantises to a wider type): legitimate, but worth saying.
  if (diags.empty() && s.hardware.gpu.peak(s.model.dtype) <= 0.0)
    s.warnings.push_back(Diagnostic{s.model_where,
                                    "model dtype " + std::string(dtype_name(s.model.dtype)) + " has no tensor cores on " +
                                        s.hardware.gpu.name + ": its kernels are priced at the fp32 peak",
                                    true});
  check_policies(s, diags);
  check_capabilities(s, serving, diags);

  if (serving && diags.empty() && s.deployment.alltoall != MoeAllToAll::kNccl) check_deepep(s, diags);

  const ParamSet out = read_params(
      root["output"], output_specs(), src, diags);
  s.trace = out.get_bool("trace");
  // The routing model validates what only it can (trace files, reachable skewness).
  // (A dense model routes nothing: its routing section is never drawn from.)
  if (diags.empty() && s.model.experts > 0) {
    const RoutingContext rc = routing_context(s);
    try {
      routing_models().get(s.routing.kind).value.make(s.routing.params, rc, s.routing.where);
    } catch (const InputError& e) {
      for (const auto& d : e.diagnostics()) diags.error(d.where, d.message);
    }
  }
  diags.throw_if_any();

  res["model"] = model_res;
  res["hardware"] = hw_res;
  res["workload"] = wl_res;
  if (serving) {
    res["serving"] = serving_res;
    res["deployment"] = deployment_res;
  }
  res["policy"] = pol_res;
  res["predictor"] = pred_res;
  res["output"] = out.to_yaml();
  s.resolved = res;
  return s;
}

}  // namespace

std::vector<ParamSpec> top_level_specs() {
  return {
      ParamSpec{"name", ParamType::kString, "scenario", "", "scenario name (results go to results/<name>/)", {}, {}, {}},
      ParamSpec{"description", ParamType::kString, "''", "", "free text", {}, {}, {}},
      ParamSpec{"seed", ParamType::kInt, "1", "", "seed of every random draw (below 2^53: kept exactly)", 0.0,
                9007199254740991.0, {}},
  };
}

const std::vector<std::string>& top_level_sections() {
  static const std::vector<std::string> names{"model",      "hardware", "workload",  "serving",
                                              "deployment", "policy",   "predictor", "output"};
  return names;
}

std::vector<ParamSpec> prefill_workload_specs() {
  return {
      ParamSpec{"kind", ParamType::kString, "prefill", "", "workload kind (serving: see scenario_serving.hpp)", {}, {},
                {"prefill", "serving"}},
      ParamSpec{"batch_size", ParamType::kInt, "8", "sequences", "sequences per batch", 1.0, {}, {}},
      ParamSpec{"seq_len", ParamType::kInt, "128", "tokens", "tokens per sequence", 1.0, {}, {}},
      // Each batch keeps a row of per-batch metrics in result.json: 10^6 is already ~1 GB of JSON.
      ParamSpec{"batches", ParamType::kInt, "1", "", "batches processed one after another", 1.0, 1e6, {}},
      ParamSpec{"warmup_batches", ParamType::kInt, "0", "batches",
                "the first batches run but are left out of the metrics (state kept across batches, such as "
                "replicas, warms up); must be fewer than batches",
                0.0, {}, {}},
      ParamSpec{"attention_parallelism", ParamType::kString, "data", "",
                "data: each GPU attends over the sequences it holds; tensor: every GPU runs 1/G of the heads "
                "over every sequence, then a ring all-reduce, and the tokens are shared evenly for the MoE "
                "layer (MoE-GPS §2); heads must divide by the GPUs",
                {}, {}, {"data", "tensor"}},
  };
}

std::vector<ParamSpec> routing_draws_specs() {
  return {ParamSpec{"draws", ParamType::kString, "auto", "",
                    "auto: a layer is drawn as selections per (GPU, expert) when the policy, the predictor and the "
                    "routing model need no token identities (O(GPUs x experts) per layer, same per-expert marginals); "
                    "tokens: always token by token",
                    {}, {}, {"auto", "tokens"}}};
}

std::vector<ParamSpec> output_specs() {
  return {ParamSpec{"trace", ParamType::kBool, "false", "", "write a Chrome trace (trace-<label>.json) per run", {}, {}, {}}};
}

RoutingContext routing_context(const Scenario& s) {
  RoutingContext rc;
  rc.experts = s.model.experts;
  rc.top_k = s.model.top_k;
  rc.moe_layers = s.model.num_moe_layers();
  rc.batches = static_cast<int>(s.workload.batches);
  rc.seq_len = s.workload.seq_len;
  rc.model_name = s.model.name;
  rc.base_dir = s.base_dir;
  rc.seed = s.seed;
  return rc;
}

Scenario load_scenario_text(const std::string& text, const std::string& file,
                            const std::vector<std::string>& overrides, const std::string& base_dir) {
  SourceMap src(file);
  const YAML::Node root = load_yaml_input(text, file);
  Diagnostics dup;
  report_duplicate_keys(root, src, dup);
  dup.throw_if_any();
  return build(root, src, overrides, base_dir);
}

Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(SourceLocation{path, 0, 0}, "is a directory, not a scenario file");
  std::ifstream in(path);
  if (!in) throw InputError(SourceLocation{path, 0, 0}, "cannot read scenario file");
  std::stringstream buf;
  buf << in.rdbuf();
  std::filesystem::path p(path);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  return load_scenario_text(buf.str(), path, overrides, dir);
}

}  // namespace moesim
