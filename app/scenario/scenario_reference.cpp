// The table of scenario sections (scenario_reference.hpp): each section's keys come from the very
// list its reader validates against, so nothing here restates a key's type, default or range.
#include "app/scenario/scenario_reference.hpp"

#include "app/scenario/scenario_keys.hpp"
#include "app/scenario/scenario_sections.hpp"
#include "app/scenario/scenario_serving.hpp"
#include "app/scenario/scenario_speculative.hpp"
#include "hardware/cluster.hpp"
#include "models/routing.hpp"
#include "policies/policy.hpp"
#include "predictors/predictor.hpp"
#include "serving/engine_profile.hpp"

namespace moesim {
namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

ScenarioSection section(std::string path, std::string variant, std::string summary, std::vector<ParamSpec> keys,
                        std::vector<SectionLink> links = {}) {
  return ScenarioSection{std::move(path), std::move(variant), std::move(summary), std::move(keys), std::move(links)};
}

void top_and_model(std::vector<ScenarioSection>& out) {
  out.push_back(section(
      "", "", "The top level of a scenario file: its name, seed and sections.", top_level_specs(),
      {{"model", "the MoE model: a preset name or a mapping (required)", "model"},
       {"hardware", "the cluster: a preset name or a mapping (required)", "hardware"},
       {"workload", "what runs: prefill batches (kind prefill, the default) or served requests (kind serving)", "workload"},
       {"serving", "the continuous-batching scheduler (kind serving only)", "serving"},
       {"deployment", "how the GPUs are split into instances, groups and pools (kind serving only)", "deployment"},
       {"policy", "the expert-placement and load-balancing policies to compare: a name, a mapping or a list", "policy"},
       {"predictor", "the expert-load predictors to compare: a name, a mapping or a list", "predictor"},
       {"output", "what is written beside result.json", "output"}}));
  out.push_back(section(
      "model", "",
      "A preset name (`model: deepseek-v3`), a preset with overrides (`{preset: NAME, <key>: value}`), a "
      "Hugging Face config (`{hf_config: config.json, <key>: value}`), or every key written out. Keys default to "
      "the preset's (or config's) values; without either, keys listed as required must be given.",
      model_field_specs(nullptr),
      {{"preset", "model preset to start from (`moesim list models`)", ""},
       {"hf_config", "a model's config.json (relative to the scenario) to start from, instead of a preset", ""},
       {"name", "the model's name in results (default: the preset's)", ""},
       {"attention", "the attention block", "model.attention"}}));
  out.push_back(section("model.attention", "", "The attention block; keys default to the preset's values.",
                        attention_specs(nullptr)));
  out.push_back(section(
      "hardware", "",
      "A cluster preset name (`hardware: dgx-h100`), or a mapping with a `preset` and overrides, or a custom "
      "cluster with a `gpu`. Keys default to the preset's values (listed: a custom cluster's).",
      cluster_field_specs(ClusterSpec{}),
      {{"preset", "cluster preset to start from (`moesim list hardware`)", ""},
       {"name", "the cluster's name in results", ""},
       {"gpu", "the GPU: a GPU preset name or a mapping", "hardware.gpu"},
       {"calibration", "a hardware profile written by `moesim calibrate fit` (relative to the scenario)", ""}}));
  out.push_back(section("hardware.gpu", "",
                        "A GPU preset name, or `{preset: NAME, <key>: value}`; keys default to the preset's values.",
                        gpu_field_specs(GpuSpec{}), {{"preset", "GPU preset to start from (`moesim list hardware`)", ""}}));
}

void workload(std::vector<ScenarioSection>& out) {
  out.push_back(section("workload", "kind: prefill",
                        "Prefill batches run one after another through every layer (the default kind).",
                        prefill_workload_specs(),
                        {{"routing", "how tokens choose experts", "workload.routing"}}));
  std::vector<SectionLink> serving_links{{"routing", "how tokens choose experts", "workload.routing"}};
  std::vector<ParamSpec> serving_keys;
  for (const ParamSpec& p : serving_workload_specs()) {
    if (p.name == "arrival") serving_links.push_back({"arrival", p.help, "workload.arrival"});
    else if (p.name == "prompt_tokens" || p.name == "output_tokens")
      serving_links.push_back({p.name, p.help + " (default " + p.default_value + ")", "workload.length"});
    else serving_keys.push_back(p);
  }
  out.push_back(section("workload", "kind: serving",
                        "Requests arrive, are scheduled by continuous batching and decode token by token.",
                        serving_keys, serving_links));
  out.push_back(section("workload.routing", "",
                        "A routing model's name (`routing: uniform`) or `{kind: NAME, <its options>}`; the options "
                        "of each kind follow.",
                        routing_draws_specs(),
                        {{"kind", "routing model (" + joined(routing_models().names()) + "; default uniform)", ""}}));
  for (const auto* e : routing_models().entries())
    out.push_back(section("workload.routing", "kind: " + e->name, e->description, e->value.params));
  const auto& processes = arrival_process_names();
  for (std::size_t i = 0; i < processes.size(); ++i)
    out.push_back(section("workload.arrival", "process: " + processes[i],
                          i == 0 ? "A process name (`arrival: closed`) or `{process: NAME, <its keys>}`; default poisson."
                                 : "",
                          arrival_specs(static_cast<ArrivalSpec::Process>(i))));
  const auto& dists = length_dist_names();
  for (std::size_t i = 0; i < dists.size(); ++i)
    out.push_back(section("workload.length", "dist: " + dists[i],
                          i == 0 ? "`prompt_tokens` and `output_tokens`: an integer, or `{dist: NAME, <its keys>}`."
                                 : "",
                          length_dist_specs(static_cast<LengthDist::Kind>(i))));
}

void serving_and_deployment(std::vector<ScenarioSection>& out) {
  const EngineProfile& none = engine_profiles().get("none").value;
  out.push_back(section(
      "serving", "",
      "The continuous-batching scheduler of every attention data-parallel rank (kind serving only). Defaults "
      "shown are engine `none`'s; an engine preset changes some of them.",
      scheduler_specs(none),
      {{"engine", "a serving engine's step costs and defaults: a name or a mapping", "serving.engine"},
       {"slo", "latency targets for goodput", "serving.slo"},
       {"speculative", "speculative decoding (absent: off)", "serving.speculative"}}));
  out.push_back(section("serving.engine", "",
                        "An engine name (`engine: sglang`; `moesim list engines`) or `{preset: NAME, <key>: value}`. "
                        "Defaults shown are engine `none`'s.",
                        engine_profile_specs(none),
                        {{"preset", "the engine to start from (" + joined(engine_profiles().names()) + ")", ""}}));
  out.push_back(section("serving.slo", "", "Latency targets; a request meeting every given one counts for goodput.",
                        slo_specs()));
  out.push_back(section("serving.speculative", "", "Speculative decoding with the model's MTP module or a draft model.",
                        speculative_specs()));
  out.push_back(section(
      "deployment", "",
      "How the GPUs serve (kind serving only): one colocated layout, or prefill and decode pools "
      "(`prefill_gpus` and `decode_gpus`, or the `prefill` and `decode` mappings).",
      deployment_specs(),
      {{"prefill", "the prefill pool's layout", "deployment.pool"}, {"decode", "the decode pool's layout", "deployment.pool"}}));
  out.push_back(section("deployment.pool", "", "`deployment.prefill` and `deployment.decode`: one pool's layout.",
                        layout_specs(true)));
}

std::string supports_text(const PredictorInfo&) { return ""; }

// What a policy declares it supports (PolicyCapabilities), as one sentence.
std::string supports_text(const PolicyInfo& info) {
  const PolicyCapabilities& c = info.supports;
  std::string out = ". Runs " + std::string(c.prefill ? "prefill and serving workloads" : "serving workloads only");
  out += c.expert_parallel ? "; places experts over the GPUs (needs deployment.expert_parallel)"
                           : "; lays experts out without expert parallelism";
  if (!c.predictors) out += "; no predictor";
  if (!c.stepped) out += "; runs in the serving engine's layer-queue mode, planning no synchronous step (no layer sampling)";
  if (!c.own_layout.empty())
    out += "; splits the GPUs itself (" + c.own_layout + ", or deployment." + c.own_layout + ")";
  return out + ".";
}

template <typename Info>
void entries(std::vector<ScenarioSection>& out, const Registry<Info>& reg, const std::string& path,
             const std::string& what, const std::string& default_name) {
  out.push_back(section(path, "",
                        "A " + what + " name, a mapping `{name: NAME, label: TEXT, <its options>}`, or a list of "
                        "either (each runs, side by side); default " + default_name + ". Each " + what +
                        "'s options follow.",
                        {},
                        {{"name", "the " + what + " (" + joined(reg.names()) + ")", ""},
                         {"label", "its name in results and trace files (default: the name, with the options that "
                                   "tell same-named entries apart)", ""}}));
  for (const auto* e : reg.entries())
    out.push_back(section(path, "name: " + e->name, e->description + supports_text(e->value), e->value.params));
}

}  // namespace

std::vector<ScenarioSection> scenario_sections() {
  std::vector<ScenarioSection> out;
  top_and_model(out);
  workload(out);
  serving_and_deployment(out);
  entries(out, policies(), "policy", "policy", "static-ep");
  entries(out, predictors(), "predictor", "predictor", "none");
  out.push_back(section("output", "", "What is written beside result.json.", output_specs()));
  return out;
}

}  // namespace moesim
