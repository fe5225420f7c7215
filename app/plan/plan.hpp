#pragma once
// `moesim plan`: searches deployments of a serving scenario for the best one at its SLOs.
//
// The scenario's model, hardware, workload and routing are fixed; its deployment, policy and
// batch limits are only the starting point. The search space is every instance size up to
// --max-gpus, every attention tensor-parallel size that divides a node and the heads, experts
// expert-parallel (with each --policies entry) or tensor-parallel in the group, colocated or
// disaggregated into prefill and decode pools, times the --max-num-seqs, --max-batched-tokens and
// --two-batch-overlap lists. One instance of each candidate is simulated: instances serve
// independent traffic, so goodput per GPU does not depend on how many of them a budget holds.
//
// Three stages (DistServe §4 and Vidur-Search's capacity search):
//   1. prune: a candidate whose scenario is invalid, or whose layout does not fit in GPU memory
//      (check_scenario_fits), is never simulated;
//   2. estimate: the others are simulated on the analytic network with layer sampling (serving.
//      layer_sampling), their capacity found by a short search of the load;
//   3. full: the best --finalists and the scenario's own deployment are simulated with the
//      scenario's network and layer sampling (by default every layer), the load searched from the
//      estimate's.
// A candidate's capacity is the highest load (arrival rate, or clients of a closed loop) at which
// the SLO attainment -- the fraction of measured requests whose TTFT and TPOT both meet the SLO
// -- is at least the --percentile: doubled or halved from the start until it brackets the
// capacity, then bisected geometrically.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/sweep/sweep.hpp"

namespace moesim {

/// How one pool (or a colocated deployment) runs the model.
struct PlanLayout {
  int tensor_parallel = 1;
  int data_parallel = 1;
  bool expert_parallel = true;
  int gpus() const { return tensor_parallel * data_parallel; }
  bool operator==(const PlanLayout&) const = default;
};

/// One deployment the search considers.
struct PlanCandidate {
  std::size_t index = 0;     ///< 0: the scenario's own deployment, as written
  bool scenario = false;     ///< the scenario's own deployment (no deployment overrides)
  int gpus = 0;              ///< GPUs of one instance
  bool disaggregated = false;
  PlanLayout colocated;      ///< !disaggregated
  PlanLayout prefill;        ///< disaggregated: the prefill pool
  PlanLayout decode;         ///< disaggregated: the decode pool
  std::string policy;        ///< a policy name (static-ep with tensor-parallel experts)
  std::int64_t max_num_seqs = 0;
  std::int64_t max_batched_tokens = 0;
  bool two_batch_overlap = false;
  /// e.g. "8 GPU TP2xDP4 EP eplb seqs=256 tokens=8192"; "scenario" for candidate 0.
  std::string label() const;
};

/// The SLO objective a plan ranks by.
enum class PlanObjective { kGoodputPerGpu, kThroughputPerGpu, kTokensPerUser, kCost };

/// Everything that defines a plan's results (not --jobs or --out).
struct PlanSpec {
  std::string file;
  std::vector<std::string> sets;            ///< --set, applied to every candidate first
  int max_gpus = 0;                         ///< 0: the scenario's cluster
  std::vector<int> gpus_per_instance;       ///< empty: 1, 2, 4, ... and node multiples up to max_gpus
  PlanObjective objective = PlanObjective::kGoodputPerGpu;
  std::optional<double> slo_ttft_ms, slo_tpot_ms;  ///< --slo (else the scenario's serving.slo)
  double percentile = 90.0;                 ///< SLO attainment a load must reach, percent
  double gpu_hour_cost = 0.0;               ///< $ per GPU-hour (0: no cost column)
  std::vector<std::string> policies{"static-ep", "eplb"};
  std::vector<std::int64_t> max_num_seqs;   ///< empty: the scenario's
  std::vector<std::int64_t> max_batched_tokens;  ///< empty: the scenario's
  std::string disaggregation = "auto";      ///< off | auto (both) | only
  std::vector<bool> two_batch_overlap{false};
  std::size_t finalists = 10;               ///< candidates simulated in full (besides the scenario's)
  int estimate_steps = 2;                   ///< bisection steps of the estimate
  int full_steps = 4;                       ///< bisection steps of the full run
  int estimate_layer_sampling = 0;          ///< serving.layer_sampling of the estimate (0: one MoE layer per step)
  double estimate_span = 0.5;               ///< the estimate's span of arrivals, as a fraction of the scenario's
};

/// One probe of a candidate: a run at one load.
struct PlanProbe {
  double load = 0.0;
  double attainment = 0.0;  ///< fraction of measured requests meeting both SLOs
  bool meets = false;
  double goodput = 0.0;     ///< requests/s meeting the SLO: arrival rate x attainment
  double throughput = 0.0;  ///< output tokens/s: arrival rate x mean output tokens
  nlohmann::json metrics;
};

/// What the search found for one candidate.
struct PlanRow {
  PlanCandidate candidate;
  /// pruned-invalid | pruned-memory | estimated | ran | failed
  std::string status;
  std::string reason;        ///< why pruned or failed; for estimated: not a finalist
  std::optional<PlanProbe> best;     ///< the highest load meeting the SLO (none: no load did)
  std::optional<PlanProbe> closest;  ///< with no best: the probe of highest attainment
  int probes = 0;
  /// The objective's value (higher is better; cost is negated), or nullopt when no load met.
  std::optional<double> score;
};

/// A plan's outcome: every candidate in index order, and the ranking (indices into rows).
struct PlanOutcome {
  std::vector<PlanRow> rows;
  std::vector<std::size_t> ranking;  ///< rows simulated in full that met the SLO, best first
  std::string load_key;              ///< the scenario key searched (workload.arrival.rate_per_s or .clients)
  std::string model_name;            ///< the scenario's model
  int experts = 0;                   ///< its routed experts
  std::string best_yaml;             ///< a runnable scenario of the winner at its load ("" if none)
  double attainment = 0.9;
};

/// Parses an --objective name (did-you-mean on a miss; InputError located at "--objective NAME").
PlanObjective parse_plan_objective(const std::string& name);
const char* plan_objective_name(PlanObjective o);
/// Parses --slo `ttft_ms=500,tpot_ms=40` into `spec`.
void parse_plan_slo(const std::string& text, PlanSpec& spec);

/// Every candidate of `spec` for a scenario whose cluster nodes have `gpus_per_node` GPUs, `heads`
/// attention heads: candidate 0 is the scenario's deployment, then by instance GPUs, colocated
/// before disaggregated. `max_gpus` is the resolved budget.
std::vector<PlanCandidate> plan_candidates(const PlanSpec& spec, int max_gpus, int gpus_per_node, int heads,
                                           std::int64_t max_num_seqs, std::int64_t max_batched_tokens);

/// Runs the search. `progress` draws a bar on stderr. Throws InputError for bad input (before any
/// simulation).
PlanOutcome run_plan(const PlanSpec& spec, unsigned jobs, bool progress);
/// Stages 1 and 2 (prune, estimate) for the candidates of `shard` (i mod N = K - 1); the others
/// get status "other-shard". run_plan is this with the whole plan, then finish_plan.
PlanOutcome estimate_plan(const PlanSpec& spec, unsigned jobs, bool progress, const SweepShard& shard);
/// Stage 3 on an estimated plan (one machine's, or merged shards'): the finalists in full, the
/// ranking and best.yaml.
void finish_plan(const PlanSpec& spec, PlanOutcome& outcome, unsigned jobs, bool progress);

/// A shard's DIR/plan-shard.json: the plan's definition, the shard, and its candidates' rows.
nlohmann::json plan_shard_json(const PlanSpec& spec, const PlanOutcome& outcome, const SweepShard& shard);
/// `moesim plan merge`: reads the shard folders of one plan (every shard once, the same
/// definition) and returns the plan they define and its estimated rows, ready for finish_plan.
/// Throws InputError located at the folder at fault.
std::pair<PlanSpec, PlanOutcome> merge_plan_shards(const std::vector<std::string>& dirs);

/// plan.csv: one row per candidate, in index order, with its rank.
std::string plan_csv(const PlanSpec& spec, const PlanOutcome& outcome);
/// The terminal table: the top `top` of the ranking and the scenario's own row.
std::string plan_table(const PlanSpec& spec, const PlanOutcome& outcome, std::size_t top = 10);
/// The winner's launch commands for vLLM, SGLang and TensorRT-LLM, with a note wherever an
/// engine has no equivalent of a setting.
std::string engine_commands(const PlanCandidate& c, const std::string& model_name, int experts, double load,
                            const std::string& load_key);

}  // namespace moesim
