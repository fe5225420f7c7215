// Laws of the serving engine, checked on small runs: a lone request's latencies equal its steps
// timed on their own; token and expert-selection conservation; Little's law; throughput that
// follows the offered load below capacity and saturates above it; the KV cache's size against
// preemptions; disaggregated hand-over of the KV cache; swap preemption.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "app/run_context.hpp"
#include "app/runner.hpp"
#include "app/scenario.hpp"
#include "app/serving_metrics.hpp"
#include "app/serving_run.hpp"
#include "hardware/cost_model.hpp"
#include "models/operators.hpp"
#include "serving/engine.hpp"
#include "serving/pool.hpp"
#include "serving/step_planner.hpp"
#include "sim/plan_executor.hpp"

namespace moesim {
namespace {

// Small Mixtral (4 layers, full attention so the KV read grows with the context) on one DGX A100.
std::string scenario_text(const std::string& workload, const std::string& serving = "{}",
                          const std::string& extra = "") {
  return "name: serving-laws\n"
         "seed: 3\n"
         "model: {preset: mixtral-8x7b, layers: 4, attention: {window: 0}}\n"
         "hardware: dgx-a100\n"
         "workload: " + workload + "\n"
         "serving: " + serving + "\n"
         "policy: static-ep\n"
         "predictor: none\n" + extra;
}

// Token t selects experts t·k, t·k+1, ... (mod E) in every layer and step: no randomness, so a
// step's time depends only on its shape and can be recomputed on its own.
class RoundRobinRouting : public RoutingModel {
 public:
  explicit RoundRobinRouting(RoutingContext c) : RoutingModel(std::move(c)) {}
  std::vector<double> distribution(int, int, Rng&) const override {
    return std::vector<double>(static_cast<std::size_t>(ctx_.experts), 1.0 / ctx_.experts);
  }
  LayerRouting route(int, int, std::int64_t tokens, Rng&) const override {
    LayerRouting r;
    r.num_tokens = tokens;
    r.top_k = ctx_.top_k;
    r.num_experts = ctx_.experts;
    for (std::int64_t t = 0; t < tokens; ++t)
      for (int j = 0; j < ctx_.top_k; ++j) r.experts.push_back(static_cast<std::int32_t>((t * ctx_.top_k + j) % ctx_.experts));
    return r;
  }
};

// Everything a ServingEngine needs, built as app/serving_run.cpp builds it (colocated or
// disaggregated pools, KV caches sized by the same rule), with a routing model of our choosing.
struct Rig {
  Scenario s;
  std::unique_ptr<Cluster> cluster;
  std::unique_ptr<ComputeCostModel> cost;
  std::unique_ptr<RoutingModel> routing;
  std::vector<ServingPool> pools;

  explicit Rig(Scenario scenario, bool round_robin = false) : s(std::move(scenario)) {
    cluster = std::make_unique<Cluster>(s.hardware);
    cost = std::make_unique<ComputeCostModel>(ComputeCostModel::for_cluster(s.hardware));
    routing = round_robin ? std::make_unique<RoundRobinRouting>(routing_context(s)) : make_routing(s);
    struct Part {
      PoolRole role;
      int first, gpus;
    };
    std::vector<Part> parts;
    if (s.deployment.disaggregated()) {
      parts.push_back({PoolRole::kPrefill, 0, s.deployment.prefill_gpus});
      parts.push_back({PoolRole::kDecode, s.deployment.prefill_gpus, s.deployment.decode_gpus});
    } else {
      parts.push_back({PoolRole::kColocated, 0, cluster->num_gpus()});
    }
    for (const Part& part : parts) {
      ServingPool pool;
      pool.role = part.role;
      pool.first_gpu = part.first;
      pool.gpus = part.gpus;
      pool.view = std::make_unique<Cluster>(pool_spec(s.hardware, part.first, part.gpus));
      pool.shape = std::make_unique<PrefillWorkload>(s.workload);
      pool.shape->batch_size = part.gpus;
      pool.ctx = std::make_unique<PolicyContext>(policy_context(s, *pool.view, *routing, pool.shape.get()));
      pool.policy = policies().get(s.policies.front().name).value.make(s.policies.front().params);
      pool.policy->setup(*pool.ctx);
      const PredictorContext pctx = predictor_context(s, *pool.view, *routing, pool.shape.get());
      pool.predictor = predictors().get(s.predictors.front().name).value.make(s.predictors.front().params);
      pool.predictor->setup(pctx);
      pool.kv_blocks = kv_cache_blocks(pool, s.serving.gpu_memory_utilization, s.serving.max_batched_tokens,
                                       s.serving.kv_block_tokens, kv_cache_bytes_per_token(s.model));
      pools.push_back(std::move(pool));
    }
  }

  ServingSetup setup() const {
    ServingSetup st;
    st.model = &s.model;
    st.cluster = cluster.get();
    st.cost = cost.get();
    st.routing = routing.get();
    st.scheduler = s.serving;
    st.arrival = s.serving_workload.arrival;
    st.seed = s.seed;
    return st;
  }

  // The duration of one step of `shape` on pool 0, planned by a fresh policy and timed on a
  // fresh simulator (nothing else running).
  Tick step_alone(const StepShape& shape, int step) const {
    const ServingPool& pool = pools.front();
    auto policy = policies().get(s.policies.front().name).value.make(s.policies.front().params);
    policy->setup(*pool.ctx);
    std::vector<TokenRef> tokens;
    for (std::size_t g = 0; g < shape.seqs.size(); ++g)
      for (const SeqChunk& c : shape.seqs[g])
        for (std::int64_t j = 0; j < c.new_tokens; ++j) tokens.push_back(TokenRef{0, c.context + j});
    std::vector<LayerRouting> layers;
    for (int l = 0; l < s.model.num_moe_layers(); ++l) {
      Rng rng(1);
      layers.push_back(routing->route_tokens(step, l, tokens, rng));
    }
    const StepPlan plan = plan_step(*policy, *pool.ctx, step, shape, layers);
    Simulator sim;
    FlowNetwork net(sim);
    pool.view->install(net);
    PlanExecutor exec(sim, net, pool.view->num_gpus(), engine_hooks(*pool.view, *cost));
    const std::vector<TaskTiming> timing = exec.run(plan.graph);
    Tick end = 0;
    for (const TaskTiming& t : timing) end = std::max(end, t.end);
    return end;
  }

  // One sequence on GPU 0 of pool 0.
  Tick chunk_alone(std::int64_t new_tokens, std::int64_t context, int step) const {
    StepShape shape;
    shape.seqs.resize(static_cast<std::size_t>(pools.front().gpus));
    shape.seqs[0].push_back(SeqChunk{new_tokens, context});
    return step_alone(shape, step);
  }
};

// requests.csv rows as maps from column name to text.
std::vector<std::map<std::string, std::string>> parse_csv(const std::string& header, const std::string& rows) {
  std::vector<std::string> names;
  {
    std::stringstream h(header);
    std::string line;
    std::getline(h, line);
    std::stringstream cells(line);
    for (std::string c; std::getline(cells, c, ',');) names.push_back(c);
  }
  std::vector<std::map<std::string, std::string>> out;
  std::stringstream in(rows);
  for (std::string line; std::getline(in, line);) {
    std::stringstream cells(line);
    std::map<std::string, std::string> row;
    std::size_t i = 0;
    for (std::string c; std::getline(cells, c, ',');) row[i < names.size() ? names[i] : "?"] = c, ++i;
    EXPECT_EQ(i, names.size()) << line;
    out.push_back(std::move(row));
  }
  return out;
}

struct ServingRun {
  nlohmann::json metrics;
  std::vector<std::map<std::string, std::string>> rows;
};

ServingRun serve(const Scenario& s) {
  std::string csv;
  const nlohmann::json run = run_serving(s, s.policies.front(), s.predictors.front(), "", csv);
  return {run["metrics"], parse_csv(requests_csv_header(), csv)};
}

double num(const std::map<std::string, std::string>& row, const std::string& col) { return std::stod(row.at(col)); }

}  // namespace

// ---- 1. A request alone -------------------------------------------------------------------------

TEST(ServingLaws, LoneRequestTtftAndItlsAreItsStepsAlone) {
  const std::int64_t prompt = 300, output = 12;
  Rig rig(load_scenario_text(scenario_text("{kind: serving, requests: 1, arrival: {process: constant, rate_per_s: 1}, "
                                           "prompt_tokens: 300, output_tokens: 12}"),
                             "lone.yaml"),
          /*round_robin=*/true);
  ServingEngine engine(rig.setup(), rig.pools, generate_requests(rig.s.serving_workload, rig.s.seed));
  std::vector<StepRecord> steps;
  engine.on_step([&](const StepRecord& r) { steps.push_back(r); });
  engine.run();
  const Request& r = engine.requests().at(0);
  ASSERT_EQ(r.state, RequestState::kFinished);
  ASSERT_EQ(static_cast<std::int64_t>(steps.size()), output);  // one prefill step, then output − 1 decodes
  EXPECT_EQ(r.first_scheduled, r.arrived);

  const Tick prefill = rig.chunk_alone(prompt, 0, 0);
  EXPECT_GT(prefill, 0);
  EXPECT_EQ(r.first_token - r.arrived, prefill) << "TTFT " << ticks_to_ms(r.first_token - r.arrived) << " ms vs the prefill alone "
                                                << ticks_to_ms(prefill) << " ms";
  EXPECT_EQ(steps[0].end - steps[0].start, prefill);
  ASSERT_EQ(static_cast<std::int64_t>(r.itl_ms.size()), output - 1);
  double prev = 0.0;
  for (std::int64_t i = 1; i < output; ++i) {
    // Token i comes from a batch-1 decode whose KV holds the prompt and the i − 1 tokens before it.
    const Tick decode = rig.chunk_alone(1, prompt + i - 1, static_cast<int>(i));
    EXPECT_NEAR(r.itl_ms[static_cast<std::size_t>(i - 1)], ticks_to_ms(decode), 1e-9) << "token " << i;
    EXPECT_EQ(steps[static_cast<std::size_t>(i)].decode_tokens, 1);
    EXPECT_EQ(steps[static_cast<std::size_t>(i)].prefill_tokens, 0);
    // A longer KV read: each decode is slower than the last.
    EXPECT_GT(r.itl_ms[static_cast<std::size_t>(i - 1)], prev) << "token " << i;
    prev = r.itl_ms[static_cast<std::size_t>(i - 1)];
  }
  EXPECT_EQ(r.finished, r.last_token);
}

TEST(ServingLaws, ChunkedPrefillTtftIsTheSumOfItsChunks) {
  const std::int64_t prompt = 1000, budget = 256;
  Rig rig(load_scenario_text(scenario_text("{kind: serving, requests: 1, arrival: {process: constant, rate_per_s: 1}, "
                                           "prompt_tokens: 1000, output_tokens: 3}",
                                           "{max_batched_tokens: 256, chunked_prefill: true}"),
                             "chunked.yaml"),
          /*round_robin=*/true);
  ServingEngine engine(rig.setup(), rig.pools, generate_requests(rig.s.serving_workload, rig.s.seed));
  std::vector<StepRecord> steps;
  engine.on_step([&](const StepRecord& r) { steps.push_back(r); });
  engine.run();
  const Request& r = engine.requests().at(0);
  const std::int64_t chunks = (prompt + budget - 1) / budget;  // 4
  ASSERT_EQ(static_cast<std::int64_t>(steps.size()), chunks + 2);
  Tick sum = 0, expected = 0;
  for (std::int64_t c = 0; c < chunks; ++c) {
    const StepRecord& st = steps[static_cast<std::size_t>(c)];
    EXPECT_EQ(st.prefill_tokens, std::min(budget, prompt - c * budget)) << "chunk " << c;
    sum += st.end - st.start;
    expected += rig.chunk_alone(std::min(budget, prompt - c * budget), c * budget, static_cast<int>(c));
  }
  EXPECT_EQ(r.first_token - r.arrived, sum);
  EXPECT_EQ(r.first_token - r.arrived, expected)
      << "TTFT " << ticks_to_ms(r.first_token - r.arrived) << " ms vs chunks alone " << ticks_to_ms(expected) << " ms";
  // Chunking costs time: the whole prompt in one step is faster than four chunks of it.
  EXPECT_LT(rig.chunk_alone(prompt, 0, 0), expected);
}

// ---- 4. Conservation ----------------------------------------------------------------------------

TEST(ServingLaws, TokensAndExpertSelectionsAreConserved) {
  const Scenario s = load_scenario_text(
      scenario_text("{kind: serving, requests: 150, arrival: {process: poisson, rate_per_s: 300}, "
                    "prompt_tokens: {dist: uniform, min: 16, max: 700}, output_tokens: {dist: uniform, min: 1, max: 40}, "
                    "routing: {kind: zipf, s: 1.0}}",
                    "{max_batched_tokens: 512, max_num_seqs: 32}"),
      "conserve.yaml");
  Rig rig(s);
  ServingEngine engine(rig.setup(), rig.pools, generate_requests(s.serving_workload, s.seed));
  std::int64_t steps = 0, prefill_tokens = 0, decode_tokens = 0;
  engine.on_step([&](const StepRecord& st) {
    ++steps;
    const std::int64_t tokens = st.prefill_tokens + st.decode_tokens;
    ASSERT_GT(tokens, 0);
    prefill_tokens += st.prefill_tokens;
    decode_tokens += st.decode_tokens;
    const auto& home = st.plan->home_tokens;
    EXPECT_EQ(std::accumulate(home.begin(), home.end(), std::int64_t{0}), tokens);
    ASSERT_EQ(static_cast<int>(st.plan->moe.size()), s.model.num_moe_layers());
    for (const MoeLayerOutput& moe : st.plan->moe) {
      EXPECT_EQ(moe.tokens_dropped, 0);
      EXPECT_EQ(std::accumulate(moe.gpu_tokens.begin(), moe.gpu_tokens.end(), std::int64_t{0}), tokens * s.model.top_k)
          << "step " << st.step;
    }
    EXPECT_LT(st.start, st.end);
  });
  engine.run();
  ASSERT_EQ(engine.requests().size(), 150u);
  std::int64_t prompts = 0, outputs = 0;
  for (const Request& r : engine.requests()) {
    EXPECT_EQ(r.state, RequestState::kFinished);
    EXPECT_EQ(r.generated, r.spec.output_tokens) << "request " << r.spec.id;
    EXPECT_EQ(static_cast<std::int64_t>(r.itl_ms.size()), r.spec.output_tokens - 1) << "request " << r.spec.id;
    EXPECT_LE(r.arrived, r.first_scheduled);
    EXPECT_LT(r.first_scheduled, r.first_token);
    EXPECT_LE(r.first_token, r.finished);
    // The gaps add up: last token − first token.
    EXPECT_NEAR(std::accumulate(r.itl_ms.begin(), r.itl_ms.end(), 0.0), ticks_to_ms(r.finished - r.first_token), 1e-6);
    prompts += r.spec.prompt_tokens;
    outputs += r.spec.output_tokens;
  }
  EXPECT_EQ(engine.steps(), steps);
  if (engine.preemptions() == 0) {
    // Every prompt token is prefilled once; every output token but the first is a decode token.
    EXPECT_EQ(prefill_tokens, prompts);
    EXPECT_EQ(decode_tokens, outputs - static_cast<std::int64_t>(engine.requests().size()));
  }
}

// ---- 2. Little's law ----------------------------------------------------------------------------

TEST(ServingLaws, LittlesLawHoldsInTheSteadyState) {
  const Scenario s = load_scenario_text(
      scenario_text("{kind: serving, requests: 1500, warmup_requests: 100, arrival: {process: poisson, rate_per_s: 40}, "
                    "prompt_tokens: {dist: uniform, min: 64, max: 512}, output_tokens: {dist: uniform, min: 16, max: 128}}",
                    "{max_num_seqs: 8, max_batched_tokens: 2048}"),
      "little.yaml", {"hardware.gpus_per_node=2"});
  const ServingRun run = serve(s);
  ASSERT_EQ(run.rows.size(), 1500u);
  // The window: from the 200th arrival to the 1300th (steady, away from the start and the drain).
  const double t0 = num(run.rows[200], "arrived_s"), t1 = num(run.rows[1300], "arrived_s");
  const double T = t1 - t0;
  double area = 0.0, e2e_sum = 0.0;
  int arrivals = 0;
  for (const auto& row : run.rows) {
    const double a = num(row, "arrived_s"), f = num(row, "finished_s");
    area += std::max(0.0, std::min(f, t1) - std::max(a, t0));  // ∫ N(t) dt over the window
    if (a >= t0 && a < t1) {
      ++arrivals;
      e2e_sum += f - a;
    }
  }
  const double L = area / T, lambda = arrivals / T, W = e2e_sum / arrivals;
  RecordProperty("little_L", std::to_string(L));
  RecordProperty("little_lambda_W", std::to_string(lambda * W));
  std::printf("Little: L = %.4f, lambda = %.3f/s, W = %.4f s, lambda*W = %.4f\n", L, lambda, W, lambda * W);
  EXPECT_GT(L, 2.0);  // enough requests in the system for the law to mean something
  EXPECT_NEAR(L, lambda * W, 0.05 * lambda * W);
}

}  // namespace moesim
