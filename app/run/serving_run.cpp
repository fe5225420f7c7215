#include "app/run/serving_run.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>

#include "app/run/layer_queue_deployment.hpp"
#include "app/run/run_context.hpp"
#include "app/run/serving_metrics.hpp"
#include "hardware/cost_model.hpp"
#include "models/operators.hpp"
#include "serving/engine.hpp"
#include "sim/chrome_trace.hpp"
#include "hardware/phase.hpp"

namespace moesim {

std::vector<ServingPool> make_serving_pools(const Scenario& s, const Cluster& /*cluster*/, const RoutingModel& routing,
                                    const PluginEntry& policy, const PluginEntry& predictor) {
  // One pool per instance of each layout, instances laid out one after another from the
  // layout's first GPU. Without expert parallelism the attention groups of an instance share
  // nothing (every expert is tensor-parallel inside its group), so each group is a pool.
  struct Part {
    PoolRole role;
    int first, gpus, tp;
    bool ep;
    int moe_ep;
    int instance;
  };
  std::vector<Part> parts;
  const auto add_layout = [&parts](PoolRole role, int first, const ParallelLayout& l) {
    const int tp = std::max(1, l.tensor_parallel);
    const int dp = l.expert_parallel ? l.data_parallel : 1;
    const int copies = l.expert_parallel ? l.instances : l.instances * l.data_parallel;
    for (int i = 0; i < copies; ++i) parts.push_back({role, first + i * tp * dp, tp * dp, tp, l.expert_parallel, l.moe_expert_parallel, i});
  };
  if (s.deployment.disaggregated()) {
    add_layout(PoolRole::kPrefill, 0, s.deployment.prefill);
    add_layout(PoolRole::kDecode, s.deployment.prefill_gpus, s.deployment.decode);
  } else {
    add_layout(PoolRole::kColocated, 0, s.deployment.colocated);
  }
  const ModelSpec& m = s.model;
  const std::int64_t longest = s.serving_workload.prompt.largest() + s.serving_workload.output.largest();
  std::vector<ServingPool> pools;
  for (const Part& part : parts) {
    ServingPool pool;
    pool.role = part.role;
    pool.first_gpu = part.first;
    pool.gpus = part.gpus;
    pool.tensor_parallel = part.tp;
    pool.expert_parallel = part.ep;
    pool.moe_expert_parallel = part.moe_ep;
    pool.instance = part.instance;
    pool.view = std::make_unique<Cluster>(pool_spec(s.hardware, part.first, part.gpus));
    // Profiling and training windows see batches of one mean prompt per GPU.
    pool.shape = std::make_unique<PrefillWorkload>(s.workload);
    pool.shape->batch_size = part.gpus;
    pool.ctx = std::make_unique<PolicyContext>(policy_context(s, *pool.view, routing, pool.shape.get()));
    pool.ctx->alltoall = s.deployment.alltoall;
    pool.policy = policies().get(policy.name).value.make(policy.params);
    at_entry(policy, [&] { pool.policy->setup(*pool.ctx); });
    const PredictorContext pctx = predictor_context(s, *pool.view, routing, pool.shape.get());
    pool.predictor = predictors().get(predictor.name).value.make(predictor.params);
    at_entry(predictor, [&] { pool.predictor->setup(pctx); });
    pool.kv_blocks = kv_cache_blocks(pool, s.serving);
    const std::int64_t need = (longest + s.serving.kv_block_tokens - 1) / s.serving.kv_block_tokens;
    const auto small = std::min_element(pool.kv_blocks.begin(), pool.kv_blocks.end());
    if (*small < need) {
      const auto g = static_cast<int>(small - pool.kv_blocks.begin()) * part.tp;
      const double block_bytes = static_cast<double>(s.serving.kv_block_tokens) * kv_cache_bytes_per_token_gpu(m, part.tp);
      throw InputError(s.serving_workload_where,
                       "policy '" + policy.label + "': the KV cache cannot hold even one request: GPU " +
                           std::to_string(part.first + g) + " (" + pool_role_name(part.role) + " pool) has room for " +
                           std::to_string(*small) + " blocks (" + gigabytes(static_cast<double>(*small) * block_bytes) +
                           " after weights and activations) but the longest request (" +
                           std::to_string(s.serving_workload.prompt.largest()) + " prompt + " +
                           std::to_string(s.serving_workload.output.largest()) + " output tokens) needs " +
                           std::to_string(need) + " blocks (" + gigabytes(static_cast<double>(need) * block_bytes) + ")");
    }
    pools.push_back(std::move(pool));
  }
  return pools;
}

namespace {

/// Request lanes beside the GPUs' in the Chrome trace: queued, prefill (to the first token),
/// decode (to the last).
void add_request_lanes(ChromeTrace& trace, const std::vector<Request>& requests) {
  for (const Request& r : requests) {
    const std::string lane = "request " + std::to_string(r.spec.id);
    trace.add_span("requests", lane, r.spec.id, "queued", r.arrived, r.first_scheduled);
    trace.add_span("requests", lane, r.spec.id, "prefill", r.first_scheduled, r.first_token);
    trace.add_span("requests", lane, r.spec.id, "decode", r.first_token, r.finished);
  }
}

/// Whether the policy plans steps on the serving engine (PolicyCapabilities::stepped).
bool stepped(const PluginEntry& policy) { return policies().get(policy.name).value.supports.stepped; }

}  // namespace

void check_serving_fits(const Scenario& s) {
  const Cluster cluster(s.hardware);
  const auto routing = make_routing(s);
  for (const auto& entry : s.policies) {
    if (!stepped(entry)) layer_queue_deployment(s, entry);
    else make_serving_pools(s, cluster, *routing, entry, s.predictors.front());
  }
  for (const auto& entry : s.policies)
    if (stepped(entry)) {
      for (const auto& pred : s.predictors) make_serving_pools(s, cluster, *routing, entry, pred);
      break;
    }
}

ServingSetup serving_setup(const Scenario& s, const Cluster& cluster, const ComputeCostModel& cost,
                           const RoutingModel& routing) {
  ServingSetup setup;
  setup.model = &s.model;
  setup.cluster = &cluster;
  setup.cost = &cost;
  setup.routing = &routing;
  setup.scheduler = s.serving;
  setup.arrival = s.serving_workload.arrival;
  setup.seed = s.seed;
  setup.count_level = count_level_routing(s, routing);
  setup.prompt_cached = s.serving_workload.prompt_cached;
  return setup;
}

/// result.json's `pools` for an attention–expert split: the attention GPUs with their KV
/// blocks, and the expert GPUs.
static nlohmann::json split_pools_json(const LayerQueueDeployment& d, int num_gpus) {
  const int a = d.config.attention_gpus;
  return nlohmann::json::array(
      {{{"pool", "attention"}, {"instance", 0}, {"first_gpu", 0}, {"gpus", a}, {"tensor_parallel", 1},
        {"expert_parallel", false}, {"kv_blocks_per_rank", d.kv_blocks}},
       {{"pool", "experts"}, {"instance", 0}, {"first_gpu", a}, {"gpus", num_gpus - a}, {"tensor_parallel", 1},
        {"expert_parallel", true}, {"kv_blocks_per_rank", nlohmann::json::array()}}});
}

nlohmann::json run_serving(const Scenario& s, const PluginEntry& policy, const PluginEntry& predictor,
                           const std::string& trace_dir, std::string& requests_csv, const ServingProgress& progress) {
  const Cluster cluster(s.hardware);
  const ComputeCostModel cost = ComputeCostModel::for_cluster(s.hardware);
  const auto routing = make_routing(s);
  // A policy that plans steps runs on pools; an attention–expert split in layer-queue mode.
  std::vector<ServingPool> pools;
  std::optional<LayerQueueDeployment> split;
  if (stepped(policy)) pools = make_serving_pools(s, cluster, *routing, policy, predictor);
  else split = layer_queue_deployment(s, policy);

  ServingSetup setup = serving_setup(s, cluster, cost, *routing);
  if (split) setup.layer_queues = &*split;
  ServingEngine engine(setup, pools, generate_requests(s.serving_workload, s.seed));

  ServingMetrics metrics(cluster, s.serving_workload.warmup_requests);
  const bool tracing = s.trace && !trace_dir.empty();
  std::optional<ChromeTrace> trace;
  if (tracing) trace.emplace(cluster.num_gpus(), phase_name);
  engine.on_step([&](const StepRecord& step) {
    metrics.add_step(step);
    if (tracing) trace->add_batch(step.plan->graph, *step.timing, step.step);
  });
  std::int64_t executions = 0;
  engine.on_execution([&](const ExecutionRecord& e) {
    metrics.add_execution(e);
    // The GPU-time sweep keeps only what may still change: every 4,096 executions it sweeps
    // what lies before the earliest graph in flight.
    if (++executions % 4096 == 0) metrics.advance(engine.layer_queues()->horizon());
    if (tracing) trace->add_batch(*e.graph, *e.timing, -1);
  });
  engine.on_transfer([&](const TaskGraph& graph, const std::vector<TaskTiming>& timing) {
    if (split) metrics.add_message(graph, timing);
    else metrics.add_transfer(graph);
    if (tracing) trace->add_batch(graph, timing, -1);
  });
  if (progress)
    engine.on_progress([&](Tick now, std::int64_t finished, std::int64_t total) { progress(ticks_to_seconds(now), finished, total); });
  engine.run();

  const std::string label = policy.label + (s.predictors.size() > 1 ? "-" + predictor.label : "");
  nlohmann::json run;
  run["policy"] = policy.name;
  run["label"] = policy.label;
  run["predictor"] = split ? "none" : predictor.name;
  run["predictor_label"] = split ? "none" : predictor.label;
  if (!pools.empty())
    if (const auto acc = pools.front().predictor->held_out_accuracy()) run["predictor_held_out_accuracy"] = *acc;
  run["metrics"] = metrics.summary(engine, s.serving);
  run["metrics"]["events"] = engine.events();
  add_steady_state_warning(run);
  nlohmann::json kv = nlohmann::json::array();
  for (const ServingPool& pool : pools)
    kv.push_back({{"pool", pool_role_name(pool.role)}, {"instance", pool.instance}, {"first_gpu", pool.first_gpu},
                  {"gpus", pool.gpus}, {"tensor_parallel", pool.tensor_parallel}, {"expert_parallel", pool.expert_parallel},
                  {"kv_blocks_per_rank", pool.kv_blocks}});
  run["metrics"]["pools"] = split ? split_pools_json(*split, cluster.num_gpus()) : kv;
  check_metric_set(run["metrics"]);
  std::ostringstream csv;
  write_requests_csv(csv, label, engine.requests(), s.serving_workload.warmup_requests);
  requests_csv += csv.str();
  if (tracing) {
    add_request_lanes(*trace, engine.requests());
    const std::string file = "trace-" + label + ".json";
    trace->write((std::filesystem::path(trace_dir) / file).string());
    run["trace"] = file;
  }
  return run;
}

}  // namespace moesim
