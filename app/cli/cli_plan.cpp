// `moesim plan`: the command line of the deployment search (app/plan.hpp).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <thread>

#include "app/cli/cli.hpp"
#include "app/plan/plan.hpp"
#include "app/sweep/sweep.hpp"
#include "core/diagnostics.hpp"
#include "policies/policy.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPlanHelp = R"(The scenario's model, hardware, workload (lengths, routing) and seed are fixed; its
deployment, policy and batch limits are the starting point. Candidates: every instance size
up to --max-gpus (1, 2, 4, ... GPUs inside a node, then whole nodes), every attention
tensor-parallel size that divides a node and the heads, experts expert-parallel (each of
--policies) or tensor-parallel in the group, colocated or split into prefill and decode pools
(a quarter, half or three quarters prefill), times the --max-num-seqs, --max-batched-tokens and
--two-batch-overlap lists. One instance is simulated: instances serve independent traffic.

Stages: candidates that are invalid or do not fit in memory are pruned without a simulation;
the rest are estimated (analytic network, serving.layer_sampling); the best --finalists and the
scenario's deployment run in full. A candidate's capacity is the highest load (the arrival
rate, or closed-loop clients) at which at least --percentile % of the measured requests meet
both SLOs: the load is doubled or halved until the capacity is bracketed, then bisected.

DIR/plan.csv    one row per candidate: its settings, status (ran, estimated, pruned-memory,
                pruned-invalid, failed) and why, the load found, SLO attainment, goodput and
                throughput per GPU, tokens/s per user, TTFT and TPOT p90, $/Mtok
DIR/best.yaml   the winner as a runnable scenario at its load (`moesim run` reproduces its row)
DIR/engines.txt the winner as vLLM, SGLang and TensorRT-LLM launch commands
DIR/plan.txt    the ranked table printed on the terminal
The same scenario and options give the same files whatever --jobs.
Exit codes: 0 (also when no deployment meets the SLO: the closest are listed), 2 bad input.)";

// Parses a comma-separated list of whole numbers in [lo, hi] given to `option`.
std::vector<std::int64_t> int_list(const std::string& option, const std::string& text, std::int64_t lo, std::int64_t hi) {
  std::vector<std::int64_t> out;
  for (const std::string& v : parse_value_list(text, option + " " + text)) {
    try {
      std::size_t used = 0;
      const long long x = std::stoll(v, &used);
      if (used == v.size() && x >= lo && x <= hi) {
        out.push_back(x);
        continue;
      }
    } catch (const std::exception&) {
    }
    throw InputError(SourceLocation{option + " " + text, 0, 0}, "each value must be a whole number from " +
                                                                 std::to_string(lo) + " to " + std::to_string(hi) +
                                                                 ", got '" + v + "'");
  }
  return out;
}

}  // namespace

PlanCommand::PlanCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("plan", "search deployments for the best goodput at the scenario's SLOs; write DIR/plan.csv");
  cmd_->add_option("file", file_, "serving scenario YAML (required unless `merge`)");
  cmd_->add_option("--max-gpus", max_gpus_, "largest instance searched (default: the scenario's cluster)")
      ->check(CLI::Range(1, 1000000));
  cmd_->add_option("--gpus-per-instance", gpus_, "instance sizes to search, e.g. 8,16 (default: 1, 2, 4, ... up to --max-gpus)");
  cmd_->add_option("--objective", objective_, "goodput-per-gpu (default), throughput-per-gpu, tokens-per-user, cost");
  cmd_->add_option("--slo", slo_, "ttft_ms=MS,tpot_ms=MS (default: the scenario's serving.slo)");
  cmd_->add_option("--percentile", percentile_, "SLO attainment a load must reach, percent (default 90)");
  cmd_->add_option("--gpu-hour-cost", cost_, "$ per GPU-hour, for $/Mtok and --objective cost");
  cmd_->add_option("--policies", policies_, "expert policies tried with expert parallelism (default static-ep,eplb)");
  cmd_->add_option("--max-num-seqs", seqs_, "serving.max_num_seqs values (default: the scenario's)");
  cmd_->add_option("--max-batched-tokens", tokens_, "serving.max_batched_tokens values (default: the scenario's)");
  cmd_->add_option("--disaggregation", disaggregation_, "off, auto (colocated and prefill/decode pools; default), only")
      ->check(CLI::IsMember({"off", "auto", "only"}));
  cmd_->add_option("--two-batch-overlap", tbo_, "values tried: false (default), true or false,true")
      ->check(CLI::IsMember({"false", "true", "false,true", "true,false"}));
  cmd_->add_option("--finalists", finalists_, "candidates simulated in full after the estimate (default 10)")
      ->check(CLI::Range(1, 100000));
  cmd_->add_option("--estimate-layer-sampling", sampling_,
                   "serving.layer_sampling of the estimate (default: the model's MoE layers, one planned per step)")
      ->check(CLI::Range(1, 256));
  cmd_->add_option("--estimate-span", span_, "the estimate's span of arrivals, a fraction of the scenario's (default 0.5)")
      ->check(CLI::Range(0.05, 1.0));
  cmd_->add_option("--set", sets_, "override a scenario key for every candidate: key.path=value (repeatable)")
      ->allow_extra_args(false);
  cmd_->add_option("--out", out_, "output directory (default results/plan-<scenario file name>/)");
  cmd_->add_option("--jobs", jobs_, "candidates simulated in parallel (default: hardware concurrency)")
      ->check(CLI::PositiveNumber);
  cmd_->add_flag("-q,--quiet", quiet_, "no progress bar");
  cmd_->add_option("--shard", shard_, "K/N: prune and estimate only candidates i with i mod N = K-1 into DIR/plan-shard.json");
  cmd_->footer(kPlanHelp);
  cmd_->require_subcommand(0, 1);
  merge_ = cmd_->add_subcommand("merge", "join the --shard folders of one plan, run its finalists, write DIR as one machine would");
  merge_->add_option("dirs", merge_dirs_, "shard folders (DIR of each `moesim plan --shard K/N --out DIR`)")->required();
  merge_->add_option("--out", merge_out_, "folder for plan.csv, best.yaml, engines.txt, plan.txt")->required();
  merge_->add_option("--jobs", merge_jobs_, "finalists simulated in parallel (default: hardware concurrency)")
      ->check(CLI::PositiveNumber);
}

bool PlanCommand::parsed() const { return cmd_->parsed(); }

int PlanCommand::run() const {
  const bool progress = !quiet_ && isatty(STDERR_FILENO) == 1;
  if (merge_->parsed()) {
    auto [spec, o] = merge_plan_shards(merge_dirs_);
    finish_plan(spec, o, merge_jobs_ ? merge_jobs_ : std::max(1u, std::thread::hardware_concurrency()), progress);
    return write_plan(spec, o, merge_out_);
  }
  if (file_.empty())
    throw InputError(SourceLocation{"moesim plan", 0, 0}, "a scenario FILE is required (moesim plan FILE [options])");
  const PlanSpec spec = spec_from_options();
  const unsigned jobs = jobs_ ? jobs_ : std::max(1u, std::thread::hardware_concurrency());
  const fs::path dir = out_.empty() ? fs::path("results") / ("plan-" + fs::path(file_).stem().string()) : fs::path(out_);
  if (!shard_.empty()) {
    const SweepShard shard = parse_sweep_shard(shard_);
    const PlanOutcome o = estimate_plan(spec, jobs, progress, shard);
    fs::create_directories(dir);
    write_atomically(dir / "plan-shard.json", plan_shard_json(spec, o, shard).dump(1) + "\n");
    std::size_t mine = 0;
    for (const PlanRow& r : o.rows) mine += r.status != "other-shard";
    std::cout << "plan: shard " << shard.text() << ": " << mine << " of " << o.rows.size()
              << " candidates estimated or pruned\nwrote " << (dir / "plan-shard.json").string()
              << " (join the shards with `moesim plan merge DIR... --out DIR`)\n";
    return 0;
  }
  // Wall times go to the terminal only: the files stay the same from run to run.
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  PlanOutcome o = estimate_plan(spec, jobs, progress, SweepShard{});
  const auto t1 = Clock::now();
  finish_plan(spec, o, jobs, progress);
  const auto t2 = Clock::now();
  const int code = write_plan(spec, o, dir.string());
  const auto s = [](auto d) { return format_number(std::round(std::chrono::duration<double>(d).count() * 10) / 10); };
  std::cout << "searched in " << s(t2 - t0) << " s wall on " << jobs << " jobs: prune and estimate " << s(t1 - t0)
            << " s, full runs " << s(t2 - t1) << " s\n";
  return code;
}

PlanSpec PlanCommand::spec_from_options() const {
  PlanSpec spec;
  spec.file = file_;
  spec.sets = sets_;
  spec.max_gpus = max_gpus_;
  if (!gpus_.empty())
    for (std::int64_t g : int_list("--gpus-per-instance", gpus_, 1, 1000000)) spec.gpus_per_instance.push_back(static_cast<int>(g));
  spec.objective = parse_plan_objective(objective_);
  if (!slo_.empty()) parse_plan_slo(slo_, spec);
  if (!(percentile_ > 0.0 && percentile_ <= 100.0))
    throw InputError(SourceLocation{"--percentile " + format_number(percentile_), 0, 0}, "must be in (0, 100]");
  spec.percentile = percentile_;
  if (!(cost_ >= 0.0 && cost_ <= 1e6))
    throw InputError(SourceLocation{"--gpu-hour-cost " + format_number(cost_), 0, 0}, "must be in [0, 1e6] $ per GPU-hour");
  spec.gpu_hour_cost = cost_;
  if (spec.objective == PlanObjective::kCost && cost_ <= 0.0)
    throw InputError(SourceLocation{"--objective cost", 0, 0}, "needs --gpu-hour-cost $ (per GPU-hour)");
  if (!policies_.empty()) {
    spec.policies = parse_value_list(policies_, "--policies " + policies_);
    for (const std::string& p : spec.policies)
      if (!policies().find(p))
        throw InputError(SourceLocation{"--policies " + policies_, 0, 0}, unknown_name_message("policy", p, policies().names()));
  }
  if (!seqs_.empty()) spec.max_num_seqs = int_list("--max-num-seqs", seqs_, 1, 1000000);
  if (!tokens_.empty()) spec.max_batched_tokens = int_list("--max-batched-tokens", tokens_, 1, 100000000);
  spec.disaggregation = disaggregation_;
  spec.two_batch_overlap.clear();
  for (const std::string& v : parse_value_list(tbo_, "--two-batch-overlap " + tbo_)) spec.two_batch_overlap.push_back(v == "true");
  spec.finalists = finalists_;
  spec.estimate_layer_sampling = sampling_;
  spec.estimate_span = span_;
  return spec;
}

int PlanCommand::write_plan(const PlanSpec& spec, const PlanOutcome& o, const std::string& out) {
  const fs::path dir(out);
  fs::create_directories(dir);
  write_atomically(dir / "plan.csv", plan_csv(spec, o));
  const std::string table = plan_table(spec, o);
  std::size_t pruned = 0, estimated = 0, full = 0;
  for (const PlanRow& r : o.rows) {
    pruned += r.status.starts_with("pruned");
    estimated += r.status == "estimated" || r.status == "ran";
    full += r.status == "ran";
  }
  std::ostringstream head;
  head << "plan: " << o.rows.size() << " candidates: " << pruned << " pruned, " << estimated << " estimated, " << full
       << " simulated in full; objective " << plan_objective_name(spec.objective) << ", SLO met by "
       << format_number(spec.percentile) << "% of requests\n";
  if (o.ranking.empty()) {
    head << "no deployment meets the SLO at any load tried; the closest (highest SLO attainment):\n";
    std::vector<const PlanRow*> close;
    for (const PlanRow& r : o.rows)
      if (r.closest) close.push_back(&r);
    std::stable_sort(close.begin(), close.end(), [](const PlanRow* a, const PlanRow* b) {
      return a->closest->attainment > b->closest->attainment;
    });
    for (std::size_t k = 0; k < close.size() && k < 5; ++k)
      head << "  " << close[k]->candidate.label() << ": " << format_number(100.0 * close[k]->closest->attainment)
           << "% at " << o.load_key << " = " << format_number(close[k]->closest->load) << "\n";
    fs::remove(dir / "best.yaml");
    fs::remove(dir / "engines.txt");
  } else {
    const PlanRow& w = o.rows[o.ranking.front()];
    write_atomically(dir / "best.yaml", o.best_yaml);
    write_atomically(dir / "engines.txt", engine_commands(w.candidate, o.model_name, o.experts, w.best->load, o.load_key));
  }
  write_atomically(dir / "plan.txt", head.str() + table);
  std::cout << head.str() << table << "\nwrote " << (dir / "plan.csv").string()
            << (o.ranking.empty() ? "" : ", best.yaml, engines.txt") << ", plan.txt\n";
  return 0;
}

}  // namespace moesim
