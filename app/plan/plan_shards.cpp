// `moesim plan --shard K/N` and `moesim plan merge` (app/plan.hpp): a plan's estimate stage spread
// over N machines. Each shard writes its candidates' rows with the plan's definition to
// DIR/plan-shard.json; merge checks that the shards are of one plan, each once, and hands the rows
// to the full stage, which then writes what one machine running the whole plan would have.
#include <filesystem>
#include <map>

#include "app/plan/plan.hpp"
#include "app/sweep/sweep_log.hpp"
#include "core/diagnostics.hpp"
#include "core/json_input.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kShardFile = "plan-shard.json";

json definition(const PlanSpec& s) {
  const std::string text = read_text_file(s.file);
  json tbo = json::array();
  for (bool b : s.two_batch_overlap) tbo.push_back(b);
  return {{"file", fs::absolute(s.file).lexically_normal().string()},
          {"file_fnv1a", fnv1a_hex(text)},
          {"set", s.sets},
          {"max_gpus", s.max_gpus},
          {"gpus_per_instance", s.gpus_per_instance},
          {"objective", plan_objective_name(s.objective)},
          {"slo_ttft_ms", s.slo_ttft_ms ? json(*s.slo_ttft_ms) : json()},
          {"slo_tpot_ms", s.slo_tpot_ms ? json(*s.slo_tpot_ms) : json()},
          {"percentile", s.percentile},
          {"gpu_hour_cost", s.gpu_hour_cost},
          {"policies", s.policies},
          {"max_num_seqs", s.max_num_seqs},
          {"max_batched_tokens", s.max_batched_tokens},
          {"disaggregation", s.disaggregation},
          {"two_batch_overlap", tbo},
          {"finalists", s.finalists},
          {"estimate_steps", s.estimate_steps},
          {"full_steps", s.full_steps},
          {"estimate_layer_sampling", s.estimate_layer_sampling},
          {"estimate_span", s.estimate_span}};
}

PlanSpec spec_from(const json& d) {
  PlanSpec s;
  s.file = d.at("file").get<std::string>();
  s.sets = d.at("set").get<std::vector<std::string>>();
  s.max_gpus = d.at("max_gpus").get<int>();
  s.gpus_per_instance = d.at("gpus_per_instance").get<std::vector<int>>();
  s.objective = parse_plan_objective(d.at("objective").get<std::string>());
  if (!d.at("slo_ttft_ms").is_null()) s.slo_ttft_ms = d["slo_ttft_ms"].get<double>();
  if (!d.at("slo_tpot_ms").is_null()) s.slo_tpot_ms = d["slo_tpot_ms"].get<double>();
  s.percentile = d.at("percentile").get<double>();
  s.gpu_hour_cost = d.at("gpu_hour_cost").get<double>();
  s.policies = d.at("policies").get<std::vector<std::string>>();
  s.max_num_seqs = d.at("max_num_seqs").get<std::vector<std::int64_t>>();
  s.max_batched_tokens = d.at("max_batched_tokens").get<std::vector<std::int64_t>>();
  s.disaggregation = d.at("disaggregation").get<std::string>();
  s.two_batch_overlap = d.at("two_batch_overlap").get<std::vector<bool>>();
  s.finalists = d.at("finalists").get<std::size_t>();
  s.estimate_steps = d.at("estimate_steps").get<int>();
  s.full_steps = d.at("full_steps").get<int>();
  s.estimate_layer_sampling = d.at("estimate_layer_sampling").get<int>();
  s.estimate_span = d.at("estimate_span").get<double>();
  return s;
}

json layout_json(const PlanLayout& l) { return {l.tensor_parallel, l.data_parallel, l.expert_parallel}; }
PlanLayout layout_from(const json& j) { return {j.at(0).get<int>(), j.at(1).get<int>(), j.at(2).get<bool>()}; }

json probe_json(const std::optional<PlanProbe>& p) {
  if (!p) return json();
  return {{"load", p->load},       {"attainment", p->attainment}, {"meets", p->meets},
          {"goodput", p->goodput}, {"throughput", p->throughput}, {"metrics", p->metrics}};
}

std::optional<PlanProbe> probe_from(const json& j) {
  if (j.is_null()) return std::nullopt;
  PlanProbe p;
  p.load = j.at("load").get<double>();
  p.attainment = j.at("attainment").get<double>();
  p.meets = j.at("meets").get<bool>();
  p.goodput = j.at("goodput").get<double>();
  p.throughput = j.at("throughput").get<double>();
  p.metrics = j.at("metrics");
  return p;
}

json row_json(const PlanRow& r) {
  const PlanCandidate& c = r.candidate;
  return {{"index", c.index},
          {"scenario", c.scenario},
          {"gpus", c.gpus},
          {"disaggregated", c.disaggregated},
          {"colocated", layout_json(c.colocated)},
          {"prefill", layout_json(c.prefill)},
          {"decode", layout_json(c.decode)},
          {"policy", c.policy},
          {"max_num_seqs", c.max_num_seqs},
          {"max_batched_tokens", c.max_batched_tokens},
          {"two_batch_overlap", c.two_batch_overlap},
          {"status", r.status},
          {"reason", r.reason},
          {"probes", r.probes},
          {"score", r.score ? json(*r.score) : json()},
          {"best", probe_json(r.best)},
          {"closest", probe_json(r.closest)}};
}

PlanRow row_from(const json& j) {
  PlanRow r;
  PlanCandidate& c = r.candidate;
  c.index = j.at("index").get<std::size_t>();
  c.scenario = j.at("scenario").get<bool>();
  c.gpus = j.at("gpus").get<int>();
  c.disaggregated = j.at("disaggregated").get<bool>();
  c.colocated = layout_from(j.at("colocated"));
  c.prefill = layout_from(j.at("prefill"));
  c.decode = layout_from(j.at("decode"));
  c.policy = j.at("policy").get<std::string>();
  c.max_num_seqs = j.at("max_num_seqs").get<std::int64_t>();
  c.max_batched_tokens = j.at("max_batched_tokens").get<std::int64_t>();
  c.two_batch_overlap = j.at("two_batch_overlap").get<bool>();
  r.status = j.at("status").get<std::string>();
  r.reason = j.at("reason").get<std::string>();
  r.probes = j.at("probes").get<int>();
  if (!j.at("score").is_null()) r.score = j["score"].get<double>();
  r.best = probe_from(j.at("best"));
  r.closest = probe_from(j.at("closest"));
  return r;
}

}  // namespace

json plan_shard_json(const PlanSpec& spec, const PlanOutcome& o, const SweepShard& shard) {
  json rows = json::array();
  for (const PlanRow& r : o.rows)
    if (r.status != "other-shard") rows.push_back(row_json(r));
  return {{"definition", definition(spec)},
          {"shard", shard.text()},
          {"candidates", o.rows.size()},
          {"load_key", o.load_key},
          {"model", o.model_name},
          {"experts", o.experts},
          {"attainment", o.attainment},
          {"rows", rows}};
}

std::pair<PlanSpec, PlanOutcome> merge_plan_shards(const std::vector<std::string>& dirs) {
  if (dirs.empty()) throw InputError(SourceLocation{"moesim plan merge", 0, 0}, "no folders to merge");
  std::vector<json> shards;
  std::map<std::size_t, std::string> seen;  // shard K -> its folder
  std::size_t count = 0;
  for (const std::string& d : dirs) {
    const fs::path path = fs::path(d) / kShardFile;
    const SourceLocation where{path.string(), 0, 0};
    if (!fs::exists(path)) throw InputError(where, "not a plan shard folder (no " + std::string(kShardFile) + ")");
    json j = parse_json_or_discarded(read_text_file(path.string()));
    if (j.is_discarded() || !j.is_object() || !j.contains("definition") || !j.contains("shard") || !j.contains("rows"))
      throw InputError(where, "not a plan shard file (written by `moesim plan --shard K/N`)");
    const SweepShard s = parse_sweep_shard(j["shard"].get<std::string>());
    if (!shards.empty() && j["definition"] != shards.front()["definition"])
      throw InputError(where, "not the same plan as " + dirs.front() + " (another scenario file or other options)");
    if (count && s.count != count)
      throw InputError(where, "shard " + s.text() + " of a plan cut in " + std::to_string(count) + " shards");
    count = s.count;
    if (!seen.emplace(s.index, d).second)
      throw InputError(where, "shard " + s.text() + " given twice (also " + seen[s.index] + ")");
    shards.push_back(std::move(j));
  }
  if (seen.size() != count) {
    std::string missing;
    for (std::size_t k = 1; k <= count; ++k)
      if (!seen.count(k)) missing += (missing.empty() ? "" : ", ") + std::to_string(k) + "/" + std::to_string(count);
    throw InputError(SourceLocation{"moesim plan merge", 0, 0}, "missing shards: " + missing);
  }
  const json& first = shards.front();
  PlanSpec spec = spec_from(first["definition"]);
  if (!fs::exists(spec.file) || fnv1a_hex(read_text_file(spec.file)) != first["definition"]["file_fnv1a"])
    throw InputError(SourceLocation{spec.file, 0, 0}, "the scenario the shards planned is missing or has changed since");
  PlanOutcome o;
  o.load_key = first["load_key"].get<std::string>();
  o.model_name = first["model"].get<std::string>();
  o.experts = first["experts"].get<int>();
  o.attainment = first["attainment"].get<double>();
  o.rows.resize(first["candidates"].get<std::size_t>());
  std::vector<bool> have(o.rows.size(), false);
  for (const json& s : shards)
    for (const json& r : s["rows"]) {
      PlanRow row = row_from(r);
      if (row.candidate.index >= o.rows.size() || have[row.candidate.index])
        throw InputError(SourceLocation{"moesim plan merge", 0, 0}, "candidate " + std::to_string(row.candidate.index) +
                                                                       " is out of range or in two shards");
      have[row.candidate.index] = true;
      o.rows[row.candidate.index] = std::move(row);
    }
  for (std::size_t i = 0; i < have.size(); ++i)
    if (!have[i])
      throw InputError(SourceLocation{"moesim plan merge", 0, 0}, "candidate " + std::to_string(i) + " is in no shard");
  return {std::move(spec), std::move(o)};
}

}  // namespace moesim
