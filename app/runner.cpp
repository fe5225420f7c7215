#include "app/runner.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include "app/metrics.hpp"
#include "sim/chrome_trace.hpp"
#include "hardware/cost_model.hpp"
#include "models/operators.hpp"
#include "serving/batch_planner.hpp"
#include "serving/memory.hpp"
#include "predictors/predictor.hpp"
#include "sim/plan_executor.hpp"

namespace moesim {

namespace {

void check_fits(const MemoryEstimate& e, const Cluster& c, const PolicyEntry& entry) {
  const std::vector<double> total = e.total();
  for (std::size_t g = 0; g < total.size(); ++g) {
    if (total[g] <= c.spec().gpu.memory_bytes) continue;
    throw InputError(entry.where,
                     "policy '" + entry.label + "': the model does not fit in GPU memory: GPU " + std::to_string(g) +
                         " needs " + gigabytes(total[g]) + " (weights " + gigabytes(e.weights[g]) + ", KV cache " +
                         gigabytes(e.kv_cache[g]) + ", activations " + gigabytes(e.activations[g]) + ") but has " +
                         gigabytes(c.spec().gpu.memory_bytes) + " (" + c.spec().gpu.name + ")");
  }
}

// A plug-in's own problems (e.g. a policy's replicas that cannot be spread evenly, a trained
// predictor's unreadable trace) are located at its scenario entry.
template <typename F>
void at_entry(const PluginEntry& entry, F&& setup) {
  try {
    setup();
  } catch (const InputError& e) {
    std::vector<Diagnostic> located;
    for (auto d : e.diagnostics()) {
      if (d.where.file.empty()) d.where = entry.where;
      located.push_back(std::move(d));
    }
    throw InputError(std::move(located));
  }
}

// Profiling batches (PolicyContext::profile_routing) come from a stream of their own, so that
// a profiled placement never sees the routing it will be measured on.
constexpr std::uint64_t kProfileStream = 0x9F0F11EULL;

std::unique_ptr<RoutingModel> make_routing(const Scenario& s) {
  return routing_models().get(s.routing.kind).value.make(s.routing.params, routing_context(s), s.routing.where);
}

PolicyContext policy_context(const Scenario& s, const Cluster& cluster, const RoutingModel& routing) {
  PolicyContext ctx{s.model, cluster, s.workload};
  ctx.profile_routing = [&s, &routing](int i, int moe_layer) {
    Rng rng = Rng::derive(s.seed, kProfileStream, static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(moe_layer));
    return routing.route(-(i + 1), moe_layer, s.workload.tokens_per_batch(), rng);
  };
  return ctx;
}

// A predictor's offline training window (PredictorContext::training_routing) is drawn from a
// stream of its own, apart from both the simulated batches and the policies' profiling window, so
// an estimate is never scored on the data it was fit on (MoE-GPS §3.2.1 splits train and test).
// Training batches use routing batch indices -1000000, -1000001, ...: to a per-batch routing
// model (e.g. `fluctuating`, or token ids in `token-conditioned`) they are offline batches of
// the same traffic, distinct from the simulated batches and from the profiling window (-1, -2, ...).
constexpr std::uint64_t kTrainingStream = 0x7EA1D47AULL;
// Per (batch, MoE layer) streams of the predictors' own draws (which selections an
// accuracy-parameterised predictor gets right): independent of the routing draws, and the same
// for every policy, so policies are compared on identical forecasts.
constexpr std::uint64_t kPredictorStream = 0x93ED1C7ULL;

PredictorContext predictor_context(const Scenario& s, const Cluster& cluster, const RoutingModel& routing) {
  PredictorContext ctx{s.model, s.workload, cluster.num_gpus()};
  ctx.training_routing = [&s, &routing](int i, int moe_layer) {
    Rng rng = Rng::derive(s.seed, kTrainingStream, static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(moe_layer));
    return routing.route(-(1000000 + i), moe_layer, s.workload.tokens_per_batch(), rng);
  };
  return ctx;
}

}  // namespace

void check_scenario_fits(const Scenario& s) {
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

/// One run: `entry`'s policy with `pred`'s predictor over every batch of `s`.
nlohmann::json run_one(const Scenario& s, const PolicyEntry& entry, const PredictorEntry& pred,
                       const std::string& trace_dir) {
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

  Simulator sim;
  FlowNetwork net(sim);
  cluster.install(net);
  PlanExecutor exec(sim, net, cluster.num_gpus(), engine_hooks(cluster, cost));
  MetricsCollector metrics(cluster);
  // Built only when a trace is written: its per-GPU lane metadata is a noticeable share of a
  // small run (sweeps run thousands).
  const bool tracing = s.trace && !trace_dir.empty();
  std::optional<ChromeTrace> trace;
  if (tracing) trace.emplace(cluster.num_gpus());
  std::vector<std::int64_t> peak_selections(cluster.num_gpus(), 0);
  const int moe_layers = s.model.num_moe_layers();
  for (int b = 0; b < static_cast<int>(s.workload.batches); ++b) {
    const auto ub = static_cast<std::uint64_t>(b);
    std::vector<LayerRouting> layers;
    std::vector<double> skew;
    std::vector<Forecast> forecasts;
    for (int l = 0; l < moe_layers; ++l) {
      Rng rng = Rng::derive(s.seed, ub, static_cast<std::uint64_t>(l));
      layers.push_back(routing->route(b, l, s.workload.tokens_per_batch(), rng));
      skew.push_back(layers.back().skewness());
    }
    // Every layer's forecast exists before the batch is planned: each is spent before its
    // layer's attention (MoE-GPS §3.1), from what earlier batches taught the predictor.
    for (int l = 0; l < moe_layers; ++l) {
      Rng rng = Rng::derive(s.seed, kPredictorStream, ub, static_cast<std::uint64_t>(l));
      forecasts.push_back(predictor->forecast(b, l, layers[static_cast<std::size_t>(l)], rng));
    }
    const BatchPlan plan = plan_batch(*policy, ctx, b, layers, &forecasts);
    const Tick start = sim.now();
    const std::vector<TaskTiming> timing = exec.run(plan.graph);
    if (b >= s.workload.warmup_batches)
      metrics.add_batch(b, plan, timing, start, skew, s.workload.tokens_per_batch(), forecasts);
    for (int l = 0; l < moe_layers; ++l) predictor->observe(b, l, layers[static_cast<std::size_t>(l)]);
    for (const auto& moe : plan.moe)
      for (std::size_t g = 0; g < moe.gpu_tokens.size(); ++g)
        peak_selections[g] = std::max(peak_selections[g], moe.gpu_tokens[g]);
    if (tracing) trace->add_batch(plan.graph, timing, b);
  }
  const MemoryEstimate mem = estimate_memory(s.model, cluster, *policy, ctx, home, peak_selections);
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

nlohmann::json run_scenario(const Scenario& s, const std::string& trace_dir) {
  nlohmann::json result;
  result["scenario"] = yaml_to_json(s.resolved);
  result["runs"] = nlohmann::json::array();
  for (const auto& entry : s.policies)
    for (const auto& pred : s.predictors) result["runs"].push_back(run_one(s, entry, pred, trace_dir));
  return result;
}

}  // namespace moesim
