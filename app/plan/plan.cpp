// `moesim plan`: the search (app/plan.hpp): prune, estimate, run the finalists in full.
#include "app/plan/plan.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <numeric>

#include <yaml-cpp/yaml.h>

#include "app/run/parallel.hpp"
#include "app/run/progress_bar.hpp"
#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "app/sweep/sweep.hpp"
#include "app/sweep/sweep_log.hpp"
#include "core/diagnostics.hpp"
#include "sim/tick.hpp"

namespace moesim {
namespace {

// Doublings or halvings of the load tried before a candidate's capacity counts as out of range.
constexpr int kBracketTries = 6;

std::string layout_yaml(const PlanLayout& l) {
  return "{tensor_parallel: " + std::to_string(l.tensor_parallel) + ", data_parallel: " +
         std::to_string(l.data_parallel) + ", expert_parallel: " + (l.expert_parallel ? "true" : "false") +
         ", instances: 1}";
}

/// The scenario read once, and what every candidate's overrides need from it.
struct PlanBase {
  explicit PlanBase(const PlanSpec& s) : spec(s) {}
  const PlanSpec& spec;
  std::string text;
  std::string dir;
  Scenario scenario;  ///< as written, with --set and --slo
  std::string load_key;
  bool integer_load = false;
  double load = 0.0;  ///< the scenario's
  std::int64_t requests = 0, warmup = 0;  ///< the scenario's
  double mean_output_tokens = 0.0;
  std::vector<std::string> common;  ///< --set, then the SLOs

  // The overrides of candidate `c` (before its load and stage).
  std::vector<std::string> overrides(const PlanCandidate& c) const {
    std::vector<std::string> o = common;
    if (c.scenario) return o;
    const ClusterSpec& h = scenario.hardware;
    if (c.gpus < h.gpus_per_node) {
      // One node cut down to the instance: its PCIe switches and sockets divided to match.
      const int per_switch = std::gcd(h.gpus_per_pcie_switch, c.gpus);
      o.push_back("hardware.nodes=1");
      o.push_back("hardware.gpus_per_node=" + std::to_string(c.gpus));
      o.push_back("hardware.gpus_per_pcie_switch=" + std::to_string(per_switch));
      o.push_back("hardware.sockets=" + std::to_string(std::gcd(h.sockets, c.gpus / per_switch)));
    } else {
      o.push_back("hardware.nodes=" + std::to_string(c.gpus / h.gpus_per_node));
    }
    // The whole deployment mapping is replaced: a colocated scenario's keys have no place in a
    // disaggregated one, and the other way round.
    const std::string a2a = "alltoall: " + scenario.resolved["deployment"]["alltoall"].as<std::string>("nccl");
    if (c.disaggregated)
      o.push_back("deployment={" + a2a + ", prefill_gpus: " + std::to_string(c.prefill.gpus()) + ", decode_gpus: " +
                  std::to_string(c.decode.gpus()) + ", prefill: " + layout_yaml(c.prefill) + ", decode: " +
                  layout_yaml(c.decode) + "}");
    else
      o.push_back("deployment={" + a2a + ", tensor_parallel: " + std::to_string(c.colocated.tensor_parallel) +
                  ", data_parallel: " + std::to_string(c.colocated.data_parallel) + ", expert_parallel: " +
                  (c.colocated.expert_parallel ? "true" : "false") + ", instances: 1}");
    o.push_back("policy=" + c.policy);
    o.push_back("serving.max_num_seqs=" + std::to_string(c.max_num_seqs));
    o.push_back("serving.max_batched_tokens=" + std::to_string(c.max_batched_tokens));
    o.push_back(std::string("serving.two_batch_overlap=") + (c.two_batch_overlap ? "true" : "false"));
    return o;
  }

  /// --estimate-layer-sampling, or by default one MoE layer planned per step, standing for all of
  /// them: the estimate only ranks candidates, and on the serving speed benchmarks one layer per
  /// step keeps throughput, mean TPOT and TTFT within 3% of the exact run (docs/benchmarks.md, Serving speed)
  /// at a fraction of the cost (DeepSeek-V3's 57 estimates on up to 64 GPUs: 7 minutes).
  int estimate_sampling() const {
    if (spec.estimate_layer_sampling > 0) return spec.estimate_layer_sampling;
    return std::clamp(scenario.model.num_moe_layers(), 1, 256);
  }

  std::string load_text(double load) const {
    return integer_load ? std::to_string(static_cast<long long>(std::llround(load))) : format_number(load);
  }

  Scenario load_at(const PlanCandidate& c, double load, bool estimate) const {
    std::vector<std::string> o = overrides(c);
    o.push_back(load_key + "=" + load_text(load));
    // Every probe keeps the scenario's span of arrivals, so requests scale with the load: a fixed
    // count at a high rate arrives in a burst shorter than one request's life, which a large batch
    // absorbs without ever reaching the steady state whose capacity is sought. A floor of 100
    // measured requests keeps low loads' attainment from resting on a handful.
    // The estimate keeps only --estimate-span of it (the warm-up whole: the window must still
    // open on a steady state).
    const double scale = load / this->load;
    const double span = estimate ? spec.estimate_span : 1.0;
    const auto warm = static_cast<std::int64_t>(std::llround(static_cast<double>(warmup) * scale));
    const auto measured = std::max<std::int64_t>(
        std::min<std::int64_t>(100, requests - warmup), std::llround(static_cast<double>(requests - warmup) * scale * span));
    o.push_back("workload.requests=" + std::to_string(warm + measured));
    o.push_back("workload.warmup_requests=" + std::to_string(warm));
    if (estimate) {
      o.push_back("hardware.network_model=analytic");
      // Layer sampling is refused with two-batch overlap and AMoE's pipelines (their layers are
      // not independent); those estimates plan every layer.
      const auto layer_queues = [](const std::string& name) { return !policies().get(name).value.supports.stepped; };
      const bool any_queues = std::any_of(scenario.policies.begin(), scenario.policies.end(),
                                          [&](const PolicyEntry& p) { return layer_queues(p.name); });
      if (!c.two_batch_overlap && !layer_queues(c.policy) &&
          !(c.scenario && (any_queues || scenario.serving.two_batch_overlap)))
        o.push_back("serving.layer_sampling=" + std::to_string(estimate_sampling()));
    }
    return load_scenario_text(text, spec.file, o, dir);
  }
};

// One run of candidate `c` at `load`.
PlanProbe probe(const PlanBase& base, const PlanCandidate& c, double load, bool estimate, double attainment) {
  Scenario s = base.load_at(c, load, estimate);
  s.resolved.reset();
  nlohmann::json runs = run_scenario(s)["runs"];
  PlanProbe p;
  p.load = load;
  p.metrics = std::move(runs.at(0)["metrics"]);
  p.attainment = p.metrics.value("slo_attainment", 0.0);
  // At a load the candidate sustains, requests leave as fast as they arrive: its goodput is the
  // arrival rate times the SLO attainment (DistServe §2.2), its output rate the arrival rate times
  // the mean output length. (The run's window-based rates undercount a run whose requests live
  // longer than its arrivals last.)
  const double rate = p.metrics.value("offered_rate_per_s", 0.0);
  p.goodput = rate * p.attainment;
  p.throughput = rate * base.mean_output_tokens;
  p.meets = p.attainment >= attainment - 1e-12;
  return p;
}

// The candidate's capacity: the highest load meeting the SLO, searched from `start` (see the
// header). Fills row.best (or row.closest) and row.probes.
void search_load(const PlanBase& base, PlanRow& row, double start, bool estimate, int steps, double attainment) {
  const auto run = [&](double load) {
    ++row.probes;
    PlanProbe p = probe(base, row.candidate, load, estimate, attainment);
    if (!p.meets && (!row.closest || p.attainment > row.closest->attainment)) row.closest = p;
    return p;
  };
  const auto snap = [&](double x) { return base.integer_load ? std::max(1.0, std::round(x)) : x; };
  std::optional<PlanProbe> lo;
  std::optional<double> hi;
  PlanProbe first = run(snap(start));
  if (first.meets) {
    lo = first;
    for (int i = 0; i < kBracketTries; ++i) {
      PlanProbe p = run(snap(lo->load * 2.0));
      if (!p.meets) {
        hi = p.load;
        break;
      }
      lo = std::move(p);
    }
  } else {
    hi = first.load;
    for (int i = 0; i < kBracketTries && *hi > (base.integer_load ? 1.0 : 0.0); ++i) {
      const double x = snap(*hi / 2.0);
      if (x >= *hi) break;
      PlanProbe p = run(x);
      if (p.meets) {
        lo = std::move(p);
        break;
      }
      hi = x;
    }
  }
  for (int i = 0; lo && hi && i < steps; ++i) {
    const double mid = snap(std::sqrt(lo->load * *hi));
    if (mid <= lo->load || mid >= *hi) break;
    PlanProbe p = run(mid);
    if (p.meets)
      lo = std::move(p);
    else
      hi = mid;
  }
  row.best = std::move(lo);
  if (row.best) row.closest.reset();
}

std::optional<double> score(const PlanSpec& spec, const PlanRow& row, int gpus) {
  if (!row.best) return std::nullopt;
  const nlohmann::json& m = row.best->metrics;
  const double thr = row.best->throughput;
  switch (spec.objective) {
    case PlanObjective::kGoodputPerGpu:
      return row.best->goodput / gpus;
    case PlanObjective::kThroughputPerGpu:
      return thr / gpus;
    case PlanObjective::kTokensPerUser: {
      const double tpot = m["tpot_ms"].value("mean", 0.0);
      return tpot > 0.0 ? 1e3 / tpot : 0.0;
    }
    case PlanObjective::kCost:
      return thr > 0.0 ? -(gpus * spec.gpu_hour_cost / 3600.0) / thr * 1e6 : std::optional<double>{};
  }
  return std::nullopt;
}

// Best first: higher score, then lower index (so ties are deterministic).
bool better(const PlanRow& a, const PlanRow& b) {
  if (a.score.has_value() != b.score.has_value()) return a.score.has_value();
  if (a.score && *a.score != *b.score) return *a.score > *b.score;
  return a.candidate.index < b.candidate.index;
}

PlanBase read_base(const PlanSpec& spec) {
  namespace fs = std::filesystem;
  const fs::path path(spec.file);
  PlanBase base(spec);
  base.text = read_text_file(spec.file);
  base.dir = path.has_parent_path() ? path.parent_path().string() : ".";
  base.common = spec.sets;
  if (spec.slo_ttft_ms) base.common.push_back("serving.slo.ttft_ms=" + format_number(*spec.slo_ttft_ms));
  if (spec.slo_tpot_ms) base.common.push_back("serving.slo.tpot_ms=" + format_number(*spec.slo_tpot_ms));
  base.scenario = load_scenario_text(base.text, spec.file, base.common, base.dir);
  const Scenario& s = base.scenario;
  const SourceLocation file{spec.file, 0, 0};
  if (s.workload_kind != WorkloadKind::kServing)
    throw InputError(file, "moesim plan needs a serving scenario (workload.kind: serving)");
  if (!s.serving.slo_ttft_ms && !s.serving.slo_tpot_ms)
    throw InputError(file, "moesim plan needs SLOs: --slo ttft_ms=MS,tpot_ms=MS or serving.slo in the scenario");
  const ArrivalSpec& a = s.serving_workload.arrival;
  if (a.process == ArrivalSpec::Process::kClosed) {
    base.load_key = "workload.arrival.clients";
    base.integer_load = true;
    base.load = a.clients;
  } else if (a.process == ArrivalSpec::Process::kTrace) {
    throw InputError(s.arrival_where, "moesim plan searches the load: the arrival must be a rate (poisson, gamma, "
                                      "constant) or closed-loop clients, not a replayed trace");
  } else {
    base.load_key = "workload.arrival.rate_per_s";
    base.load = a.rate_per_s;
  }
  base.requests = s.serving_workload.requests;
  base.warmup = s.serving_workload.warmup_requests;
  base.mean_output_tokens = s.serving_workload.output.expected();
  const int cluster = s.hardware.num_gpus();
  if (spec.max_gpus > 0 && spec.max_gpus > s.hardware.gpus_per_node && spec.max_gpus % s.hardware.gpus_per_node != 0)
    throw InputError(SourceLocation{"--max-gpus " + std::to_string(spec.max_gpus), 0, 0},
                     "an instance larger than a node takes whole nodes of " +
                         std::to_string(s.hardware.gpus_per_node) + " GPUs: give a multiple");
  (void)cluster;
  return base;
}

// Candidate 0's settings, as the scenario has them (for its row and its engine commands).
void describe_scenario(const Scenario& s, PlanCandidate& c) {
  const DeploymentConfig& d = s.deployment;
  c.gpus = s.hardware.num_gpus();
  const auto layout = [](const ParallelLayout& l, int gpus) {
    const int tp = std::max(1, l.tensor_parallel);
    return PlanLayout{tp, l.data_parallel > 0 ? l.data_parallel : std::max(1, gpus / tp), l.expert_parallel};
  };
  c.disaggregated = d.disaggregated();
  if (c.disaggregated) {
    c.prefill = layout(d.prefill, d.prefill_gpus);
    c.decode = layout(d.decode, d.decode_gpus);
  } else {
    c.colocated = layout(d.colocated, c.gpus);
  }
  c.policy = s.policies.empty() ? "static-ep" : s.policies.front().name;
  c.max_num_seqs = s.serving.max_num_seqs;
  c.max_batched_tokens = s.serving.max_batched_tokens;
  c.two_batch_overlap = s.serving.two_batch_overlap;
}

// Throws when nothing the budget allows fits: the budget is the input at fault.
void check_some_fit(const PlanOutcome& out, int max_gpus, const std::string& model) {
  for (const PlanRow& r : out.rows)
    if (!r.candidate.scenario && !r.status.starts_with("pruned") && r.status != "other-shard") return;
  std::string why;
  for (const PlanRow& r : out.rows)
    if (!r.candidate.scenario && r.status == "pruned-memory") {
      why = r.candidate.label() + ": " + r.reason;
      break;
    }
  throw InputError(SourceLocation{"--max-gpus " + std::to_string(max_gpus), 0, 0},
                   "no deployment of at most " + std::to_string(max_gpus) + " GPUs holds " + model +
                       (why.empty() ? std::string() : " (e.g. " + why + ")"));
}

// Runs f() for a candidate's search: bad input found only while it runs (a layout that outgrows
// memory once routed, durations past simulated time) fails that candidate, with the reason.
void guarded(PlanRow& row, const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    row.status = "failed";
    row.reason = e.diagnostics().empty() ? e.what() : e.diagnostics().front().message;
  } catch (const TimeRangeError& e) {
    row.status = "failed";
    row.reason = e.what();
  } catch (const std::logic_error& e) {
    std::cerr << "plan: candidate " << row.candidate.index << " (" << row.candidate.label() << "): " << e.what() << "\n";
    throw;
  }
}

int budget(const PlanSpec& spec, const Scenario& s) { return spec.max_gpus > 0 ? spec.max_gpus : s.hardware.num_gpus(); }

// Searches the capacity of rows `which` in parallel, each from start(row): the estimate, or the
// full runs (which start afresh from the estimate's capacity).
void search_rows(const PlanBase& base, const PlanSpec& spec, PlanOutcome& out, const std::vector<std::size_t>& which,
                 bool estimate, unsigned jobs, bool progress, const std::function<double(const PlanRow&)>& start) {
  ProgressBar bar(estimate ? "plan: estimate" : "plan: full runs", "candidates", which.size(), 0, progress);
  parallel_for(which.size(), jobs, [&](std::size_t k) {
    PlanRow& row = out.rows[which[k]];
    const double from = start(row);
    row.best.reset();
    row.closest.reset();
    row.probes = 0;
    guarded(row, [&] {
      search_load(base, row, from, estimate, estimate ? spec.estimate_steps : spec.full_steps, out.attainment);
      row.status = estimate ? "estimated" : "ran";
      row.score = score(spec, row, row.candidate.gpus);
    });
    bar.advance();
  });
  bar.finish();
}

}  // namespace

PlanOutcome estimate_plan(const PlanSpec& spec, unsigned jobs, bool progress, const SweepShard& shard) {
  const PlanBase base = read_base(spec);
  const Scenario& s = base.scenario;
  const int max_gpus = budget(spec, s);
  PlanOutcome out;
  out.load_key = base.load_key;
  out.attainment = spec.percentile / 100.0;
  std::vector<PlanCandidate> cands = plan_candidates(spec, max_gpus, s.hardware.gpus_per_node, s.model.attention.heads,
                                                     s.serving.max_num_seqs, s.serving.max_batched_tokens);
  describe_scenario(s, cands[0]);
  out.model_name = s.model.name;
  out.experts = s.model.experts;
  out.rows.resize(cands.size());
  std::vector<std::size_t> mine;
  for (std::size_t i = 0; i < cands.size(); ++i) {
    out.rows[i].candidate = cands[i];
    out.rows[i].status = "other-shard";
    if (shard.has(i)) mine.push_back(i);
  }

  // 1. Prune: invalid scenarios and layouts that do not fit in memory are never simulated.
  parallel_for(mine.size(), jobs, [&](std::size_t k) {
    PlanRow& row = out.rows[mine[k]];
    std::optional<Scenario> sc;
    try {
      sc = base.load_at(row.candidate, base.load, false);
    } catch (const InputError& e) {
      row.status = "pruned-invalid";
      row.reason = e.diagnostics().empty() ? e.what() : e.diagnostics().front().message;
      return;
    }
    try {
      check_scenario_fits(*sc);
      row.status = "feasible";
    } catch (const InputError& e) {
      row.status = "pruned-memory";
      row.reason = e.diagnostics().empty() ? e.what() : e.diagnostics().front().message;
    }
  });
  if (shard.count == 1) check_some_fit(out, max_gpus, s.model.name);

  // 2. Estimate every feasible candidate; each starts from the scenario's load per GPU.
  std::vector<std::size_t> feasible;
  for (std::size_t i : mine)
    if (out.rows[i].status == "feasible") feasible.push_back(i);
  const double per_gpu = base.load / std::max(1, s.hardware.num_gpus());
  search_rows(base, spec, out, feasible, true, jobs, progress, [&](const PlanRow& row) {
    return row.candidate.scenario ? base.load : per_gpu * row.candidate.gpus;
  });
  return out;
}

void finish_plan(const PlanSpec& spec, PlanOutcome& out, unsigned jobs, bool progress) {
  const PlanBase base = read_base(spec);
  const int max_gpus = budget(spec, base.scenario);
  check_some_fit(out, max_gpus, base.scenario.model.name);
  // 3. The finalists (and the scenario's deployment) in full, from their estimated capacity.
  std::vector<std::size_t> order;
  for (std::size_t i = 1; i < out.rows.size(); ++i)
    if (out.rows[i].status == "estimated") order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return better(out.rows[a], out.rows[b]); });
  std::vector<std::size_t> finals(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(std::min(spec.finalists, order.size())));
  for (std::size_t i : order)
    if (std::find(finals.begin(), finals.end(), i) == finals.end()) out.rows[i].reason = "not a finalist by the estimate";
  if (out.rows[0].status == "estimated") finals.insert(finals.begin(), 0);
  search_rows(base, spec, out, finals, false, jobs, progress, [&](const PlanRow& row) {
    return row.best ? row.best->load : (row.closest ? row.closest->load : base.load);
  });
  out.ranking.clear();
  for (std::size_t i : finals)
    if (out.rows[i].status == "ran" && out.rows[i].score) out.ranking.push_back(i);
  std::stable_sort(out.ranking.begin(), out.ranking.end(),
                   [&](std::size_t a, std::size_t b) { return better(out.rows[a], out.rows[b]); });
  out.best_yaml.clear();
  if (out.ranking.empty()) return;
  const PlanRow& w = out.rows[out.ranking.front()];
  const Scenario best = base.load_at(w.candidate, w.best->load, false);
  YAML::Emitter e;
  e << best.resolved;
  out.best_yaml = "# moesim plan: the best of " + std::to_string(out.rows.size()) + " candidates for " +
                  std::filesystem::path(spec.file).filename().string() + " (" + plan_objective_name(spec.objective) +
                  "): " + w.candidate.label() + ",\n# one instance of " + std::to_string(w.candidate.gpus) +
                  " GPUs at " + base.load_key + " = " + base.load_text(w.best->load) + "; a budget of " +
                  std::to_string(max_gpus) + " GPUs holds " + std::to_string(max_gpus / std::max(1, w.candidate.gpus)) +
                  " such instances.\n" + e.c_str() + "\n";
}

PlanOutcome run_plan(const PlanSpec& spec, unsigned jobs, bool progress) {
  PlanOutcome out = estimate_plan(spec, jobs, progress, SweepShard{});
  finish_plan(spec, out, jobs, progress);
  return out;
}

}  // namespace moesim
