#include "app/run/runner.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <utility>

#include "app/run/metrics.hpp"
#include "app/run/parallel.hpp"
#include "app/run/run_context.hpp"
#include "app/run/serving_metrics.hpp"
#include "app/run/serving_run.hpp"
#include "core/version.hpp"
#include "sim/chrome_trace.hpp"
#include "hardware/cost_model.hpp"
#include "models/operators.hpp"
#include "serving/batch_planner.hpp"
#include "policies/memory.hpp"
#include "predictors/predictor.hpp"
#include "serving/prefill_driver.hpp"
#include "hardware/cluster_run.hpp"
#include "hardware/phase.hpp"

namespace moesim {

void check_scenario_fits(const Scenario& s) {
  if (s.workload_kind == WorkloadKind::kServing) {
    check_serving_fits(s);
    return;
  }
  const Cluster cluster(s.hardware);
  const auto routing = make_routing(s);
  const PolicyContext ctx = policy_context(s, cluster, *routing);
  const auto home = home_tokens_of(s.workload, cluster.num_gpus());
  for (const auto& entry : s.policies) {
    auto policy = policies().get(entry.name).value.make(entry.params);
    at_entry(entry, [&] { policy->setup(ctx); });
    check_fits(estimate_memory(s.model, cluster, *policy, ctx, home, balanced_selections(s.model, home)), cluster, entry);
  }
  // Predictors train at setup; their problems (e.g. too few training batches) belong to validation too.
  const PredictorContext pctx = predictor_context(s, cluster, *routing);
  for (const auto& entry : s.predictors) {
    auto predictor = predictors().get(entry.name).value.make(entry.params);
    at_entry(entry, [&] { predictor->setup(pctx); });
  }
}

nlohmann::json yaml_to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json j = nlohmann::json::object();
      for (const auto& kv : node) j[kv.first.as<std::string>()] = yaml_to_json(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& v : node) j.push_back(yaml_to_json(v));
      return j;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      if (node.Tag() == "!") return s;  // quoted: always a string
      if (s == "true" || s == "false") return s == "true";
      try {
        std::size_t used = 0;
        const long long i = std::stoll(s, &used);
        if (used == s.size()) return i;
        const double d = std::stod(s, &used);
        if (used == s.size()) return d;
      } catch (...) {
      }
      return s;
    }
    default: return nullptr;
  }
}

namespace {

/// One run: `entry`'s policy with `pred`'s predictor over every batch of `s`; `batch_done` (if
/// set) after each batch.
nlohmann::json run_one(const Scenario& s, const PolicyEntry& entry, const PredictorEntry& pred,
                       const std::string& trace_dir, const std::function<void()>& batch_done) {
  const Cluster cluster(s.hardware);
  const ComputeCostModel cost = ComputeCostModel::for_cluster(s.hardware);
  const auto routing = make_routing(s);
  const PolicyContext ctx = policy_context(s, cluster, *routing);
  auto policy = policies().get(entry.name).value.make(entry.params);
  at_entry(entry, [&] { policy->setup(ctx); });
  const auto home = home_tokens_of(s.workload, cluster.num_gpus());
  check_fits(estimate_memory(s.model, cluster, *policy, ctx, home, balanced_selections(s.model, home)), cluster, entry);
  const PredictorContext pctx = predictor_context(s, cluster, *routing);
  auto predictor = predictors().get(pred.name).value.make(pred.params);
  at_entry(pred, [&] { predictor->setup(pctx); });

  ClusterRun cluster_run(cluster, cost);
  const Simulator& sim = cluster_run.sim;
  MetricsCollector metrics(cluster);
  // Built only when a trace is written: its per-GPU lane metadata is a noticeable share of a
  // small run (sweeps run thousands).
  const bool tracing = s.trace && !trace_dir.empty();
  std::optional<ChromeTrace> trace;
  if (tracing) trace.emplace(cluster.num_gpus(), phase_name);
  std::optional<BatchRecorder> recorder;
  PrefillDriver::Hooks hooks;
  hooks.begin_batch = [&](int b) -> BatchObserver* {
    recorder.reset();
    if (b < s.workload.warmup_batches) return nullptr;
    return &recorder.emplace(metrics.begin_batch(sim.now()));
  };
  hooks.end_batch = [&](int b, const BatchFeed& feed) {
    if (recorder) {
      recorder->finish();
      metrics.add_batch(b, *recorder, feed.moe(), feed.skewness(), s.workload.tokens_per_batch(), feed.forecasts());
    }
    if (batch_done) batch_done();
  };
  if (tracing)
    hooks.trace = [&](int b, const TaskGraph& graph, const std::vector<TaskTiming>& timing) {
      trace->add_batch(graph, timing, b);
    };
  const BatchDraws draws{s.seed, s.workload.tokens_per_batch(), count_level_routing(s, *routing)};
  PrefillDriver driver(cluster_run.exec, *policy, ctx, *routing, *predictor, draws, home);
  driver.run(static_cast<int>(s.workload.batches), hooks);
  const MemoryEstimate mem = estimate_memory(s.model, cluster, *policy, ctx, home, driver.peak_selections());
  check_fits(mem, cluster, entry);
  metrics.set_memory(mem.total());

  nlohmann::json run;
  run["policy"] = entry.name;
  run["label"] = entry.label;
  run["predictor"] = pred.name;
  run["predictor_label"] = pred.label;
  if (const auto acc = predictor->held_out_accuracy()) run["predictor_held_out_accuracy"] = *acc;
  run["metrics"] = metrics.summary();
  run["metrics"]["events"] = sim.events_run();
  if (tracing) {
    const std::string file = "trace-" + entry.label + (s.predictors.size() > 1 ? "-" + pred.label : "") + ".json";
    trace->write((std::filesystem::path(trace_dir) / file).string());
    run["trace"] = file;
  }
  return run;
}

}  // namespace

nlohmann::json run_scenario(const Scenario& s, const std::string& trace_dir, const ServingProgress& progress,
                            unsigned jobs, const std::function<void()>& batch_done) {
  nlohmann::json result;
  result["moesim"] = {{"version", moesim_version()}, {"commit", moesim_commit()}};
  result["scenario"] = yaml_to_json(s.resolved);
  if (!s.warnings.empty()) {
    result["warnings"] = nlohmann::json::array();
    for (const Diagnostic& w : s.warnings) result["warnings"].push_back(w.to_string());
  }
  result["runs"] = nlohmann::json::array();
  // Runs in result order, policies outermost; each builds its own cluster, routing model, policy,
  // predictor and simulator, and shares only the read-only scenario.
  std::vector<std::pair<const PolicyEntry*, const PredictorEntry*>> pairs;
  for (const auto& entry : s.policies)
    for (const auto& pred : s.predictors) pairs.emplace_back(&entry, &pred);
  std::vector<nlohmann::json> runs(pairs.size());
  const bool serving = s.workload_kind == WorkloadKind::kServing;
  std::vector<std::string> csv(serving ? pairs.size() : 0);
  // The progress callback sees one run at a time.
  std::mutex progress_mutex;
  ServingProgress serialized;
  if (progress) {
    serialized = [&](double simulated_s, std::int64_t finished, std::int64_t total) {
      const std::lock_guard lock(progress_mutex);
      progress(simulated_s, finished, total);
    };
  }
  parallel_for_ordered(pairs.size(), jobs, [&](std::size_t i) {
    const auto [entry, pred] = pairs[i];
    runs[i] = serving ? run_serving(s, *entry, *pred, trace_dir, csv[i], serialized) : run_one(s, *entry, *pred, trace_dir, batch_done);
  });
  for (auto& run : runs) result["runs"].push_back(std::move(run));
  if (serving && !trace_dir.empty()) {
    const std::filesystem::path file = std::filesystem::path(trace_dir) / "requests.csv";
    std::ofstream out(file);
    out << requests_csv_header();
    for (const auto& rows : csv) out << rows;
    if (!out.flush()) throw std::runtime_error("cannot write " + file.string());
    result["requests_csv"] = "requests.csv";
  }
  return result;
}

}  // namespace moesim
