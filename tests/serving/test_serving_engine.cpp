// Laws of the serving engine, checked on small runs: a lone request's latencies equal its steps
// timed on their own; token and expert-selection conservation; Little's law; throughput that
// follows the offered load below capacity and saturates above it; the KV cache's size against
// preemptions; disaggregated hand-over of the KV cache, and decode preemptions under KV pressure;
// swap preemption.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "sim/flow_network.hpp"
#include "app/run/run_context.hpp"
#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "app/run/serving_metrics.hpp"
#include "app/run/serving_run.hpp"
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

// Everything a ServingEngine needs, built by app/serving_run.cpp's make_serving_pools (colocated
// or disaggregated pools, KV caches sized by the same rule), with a routing model of our choosing.
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
    pools = make_serving_pools(s, *cluster, *routing, s.policies.front(), s.predictors.front());
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
  ASSERT_EQ(static_cast<std::int64_t>(r.itl.size()), output - 1);
  const std::vector<double> itl_ms = r.itl_ms(engine.inter_token_gaps());
  double prev = 0.0;
  for (std::int64_t i = 1; i < output; ++i) {
    // Token i comes from a batch-1 decode whose KV holds the prompt and the i − 1 tokens before it.
    const Tick decode = rig.chunk_alone(1, prompt + i - 1, static_cast<int>(i));
    EXPECT_NEAR(itl_ms[static_cast<std::size_t>(i - 1)], ticks_to_ms(decode), 1e-9) << "token " << i;
    EXPECT_EQ(steps[static_cast<std::size_t>(i)].decode_tokens, 1);
    EXPECT_EQ(steps[static_cast<std::size_t>(i)].prefill_tokens, 0);
    // A longer KV read: each decode is slower than the last.
    EXPECT_GT(itl_ms[static_cast<std::size_t>(i - 1)], prev) << "token " << i;
    prev = itl_ms[static_cast<std::size_t>(i - 1)];
  }
  EXPECT_EQ(r.finished, r.last_token);
  std::printf("lone request: TTFT %.4f ms (prefill of %lld alone %.4f ms), ITL %.5f .. %.5f ms\n",
              ticks_to_ms(r.first_token - r.arrived), static_cast<long long>(prompt), ticks_to_ms(prefill), itl_ms.front(),
              itl_ms.back());
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
  std::printf("chunked: TTFT %.4f ms = %lld chunks alone %.4f ms (whole prompt in one step %.4f ms)\n",
              ticks_to_ms(r.first_token - r.arrived), static_cast<long long>(chunks), ticks_to_ms(expected),
              ticks_to_ms(rig.chunk_alone(prompt, 0, 0)));
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
    EXPECT_EQ(static_cast<std::int64_t>(r.itl.size()), r.spec.output_tokens - 1) << "request " << r.spec.id;
    EXPECT_LE(r.arrived, r.first_scheduled);
    EXPECT_LT(r.first_scheduled, r.first_token);
    EXPECT_LE(r.first_token, r.finished);
    // The gaps add up: last token − first token.
    const std::vector<double> itl_ms = r.itl_ms(engine.inter_token_gaps());
    EXPECT_NEAR(std::accumulate(itl_ms.begin(), itl_ms.end(), 0.0), ticks_to_ms(r.finished - r.first_token), 1e-6);
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

// ---- 3. Throughput against the offered load ---------------------------------------------------

namespace {
// Two ranks of at most 8 sequences: about 55 requests/s of this workload.
Scenario capacity_scenario(double rate) {
  return load_scenario_text(
      scenario_text("{kind: serving, requests: 1000, warmup_requests: 200, arrival: {process: poisson, rate_per_s: " +
                        std::to_string(rate) +
                        "}, prompt_tokens: {dist: uniform, min: 64, max: 512}, output_tokens: {dist: uniform, min: 16, max: 128}}",
                    "{max_num_seqs: 8, max_batched_tokens: 2048}"),
      "capacity.yaml", {"hardware.gpus_per_node=2"});
}
}  // namespace

TEST(ServingLaws, ThroughputFollowsTheOfferedLoadThenSaturates) {
  std::vector<double> rates{10, 20, 40, 100, 200, 400}, achieved, queue;
  for (double rate : rates) {
    const ServingRun run = serve(capacity_scenario(rate));
    achieved.push_back(run.metrics["request_rate_per_s"].get<double>());
    queue.push_back(run.metrics["queue_delay_ms"]["mean"].get<double>());
    const double offered = run.metrics["offered_rate_per_s"].get<double>();
    std::printf("rate %5.0f: offered %.2f/s, achieved %.2f/s, queue delay %.1f ms, e2e %.1f ms\n", rate, offered,
                achieved.back(), queue.back(), run.metrics["e2e_ms"]["mean"].get<double>());
    if (rate <= 40) {
      EXPECT_NEAR(achieved.back(), offered, 0.05 * offered) << "below capacity at " << rate << "/s";
      EXPECT_NEAR(offered, rate, 0.1 * rate);
    } else {
      EXPECT_LT(achieved.back(), 0.75 * offered) << "above capacity at " << rate << "/s";
    }
    if (rate == 200) {
      // Saturated: the queue grows with every request, so later requests wait longer.
      std::vector<double> waits;
      for (const auto& row : run.rows)
        if (row.at("warmup") == "0") waits.push_back(num(row, "queue_delay_ms"));
      const std::size_t q = waits.size() / 4;
      const double first = std::accumulate(waits.begin(), waits.begin() + static_cast<std::ptrdiff_t>(q), 0.0) / static_cast<double>(q);
      const double last = std::accumulate(waits.end() - static_cast<std::ptrdiff_t>(q), waits.end(), 0.0) / static_cast<double>(q);
      EXPECT_GT(last, 2.0 * first) << "queueing delay of the first and last quarter: " << first << " ms, " << last << " ms";
    }
  }
  // Past the knee, doubling the offered rate barely moves throughput ...
  EXPECT_NEAR(achieved[4], achieved[3], 0.1 * achieved[3]);
  EXPECT_NEAR(achieved[5], achieved[4], 0.1 * achieved[4]);
  // ... and never exceeds what the system served below it by much; the queueing delay jumps.
  EXPECT_GT(achieved[3], achieved[2]);
  EXPECT_GT(queue[3], 10.0 * queue[2]);
  for (std::size_t i = 1; i < rates.size(); ++i) EXPECT_GE(queue[i], queue[i - 1]) << "rate " << rates[i];
}

// ---- 5. KV bytes per token against capacity and preemptions ---------------------------------

TEST(ServingLaws, MhaHoldsFewerTokensAndPreemptsMoreThanGqa) {
  const std::string workload =
      "{kind: serving, requests: 400, warmup_requests: 50, arrival: {process: poisson, rate_per_s: 400}, "
      "prompt_tokens: {dist: uniform, min: 256, max: 1024}, output_tokens: {dist: uniform, min: 64, max: 256}}";
  const std::string serving = "{max_num_seqs: 64, max_batched_tokens: 1024, gpu_memory_utilization: 0.036}";
  const Scenario gqa = load_scenario_text(scenario_text(workload, serving), "gqa.yaml");
  const Scenario mha =
      load_scenario_text(scenario_text(workload, serving), "mha.yaml", {"model.attention.kind=mha", "model.attention.kv_heads=32"});
  ASSERT_DOUBLE_EQ(kv_cache_bytes_per_token(mha.model), 4.0 * kv_cache_bytes_per_token(gqa.model));
  const ServingRun a = serve(gqa), b = serve(mha);
  const auto blocks_a = a.metrics["pools"][0]["kv_blocks_per_rank"].get<std::vector<std::int64_t>>();
  const auto blocks_b = b.metrics["pools"][0]["kv_blocks_per_rank"].get<std::vector<std::int64_t>>();
  ASSERT_EQ(blocks_a.size(), 8u);
  const std::int64_t pa = a.metrics["preemptions"].get<std::int64_t>(), pb = b.metrics["preemptions"].get<std::int64_t>();
  std::printf("KV blocks per GPU: GQA %lld, MHA %lld; preemptions: GQA %lld, MHA %lld\n", static_cast<long long>(blocks_a[0]),
              static_cast<long long>(blocks_b[0]), static_cast<long long>(pa), static_cast<long long>(pb));
  for (std::size_t g = 0; g < blocks_a.size(); ++g) {
    // 4× the bytes per token (and bigger K/V projections taking memory too): at most a quarter.
    EXPECT_LE(4 * blocks_b[g], blocks_a[g]) << "GPU " << g;
    EXPECT_GT(blocks_b[g], 0);
  }
  // An eighth of the blocks: several times the preemptions (42 against 289 with NCCL-priced
  // collectives; 10x held with the line-rate model, whose faster steps let GQA preempt less).
  EXPECT_GT(pb, 4 * std::max<std::int64_t>(pa, 1));
  EXPECT_GT(b.metrics["queue_delay_ms"]["mean"].get<double>(), a.metrics["queue_delay_ms"]["mean"].get<double>());
  EXPECT_DOUBLE_EQ(b.metrics["kv_cache_peak_fraction"].get<double>(), 1.0);
  // Preemptions in requests.csv add up to the run's.
  std::int64_t sum = 0;
  for (const auto& row : b.rows) sum += std::stoll(row.at("preemptions"));
  EXPECT_EQ(sum, pb);
}

// ---- 9. Swap preemption ---------------------------------------------------------------------

TEST(ServingLaws, SwapPreemptionMovesKvOverPcieAndEveryRequestCompletes) {
  const Scenario s = load_scenario_text(
      scenario_text("{kind: serving, requests: 300, arrival: {process: poisson, rate_per_s: 400}, "
                    "prompt_tokens: {dist: uniform, min: 256, max: 1024}, output_tokens: {dist: uniform, min: 64, max: 256}}",
                    "{max_num_seqs: 64, max_batched_tokens: 1024, gpu_memory_utilization: 0.036, preemption: swap}"),
      "swap.yaml", {"model.attention.kind=mha", "model.attention.kv_heads=32"});
  const ServingRun run = serve(s);
  const double h2d = run.metrics["bytes"]["host_to_device"].get<double>();
  const double kvb = kv_cache_bytes_per_token(s.model);
  std::printf("swap: %lld preemptions, host<->device %.3g bytes (%.0f KV tokens)\n",
              static_cast<long long>(run.metrics["preemptions"].get<std::int64_t>()), h2d, h2d / kvb);
  EXPECT_GT(run.metrics["preemptions"].get<std::int64_t>(), 0);
  EXPECT_GT(h2d, 0.0);
  // Every swapped-out cache comes back whole: out and in, the same tokens.
  EXPECT_EQ(std::fmod(h2d, 2.0 * kvb), 0.0);
  ASSERT_EQ(run.rows.size(), 300u);
  for (const auto& row : run.rows) {
    EXPECT_GE(num(row, "finished_s"), num(row, "first_token_s"));
    EXPECT_GT(num(row, "first_token_s"), num(row, "arrived_s"));
  }
  // Recompute on the same load moves nothing over PCIe.
  const ServingRun rec = serve(load_scenario_text(
      scenario_text("{kind: serving, requests: 300, arrival: {process: poisson, rate_per_s: 400}, "
                    "prompt_tokens: {dist: uniform, min: 256, max: 1024}, output_tokens: {dist: uniform, min: 64, max: 256}}",
                    "{max_num_seqs: 64, max_batched_tokens: 1024, gpu_memory_utilization: 0.036, preemption: recompute}"),
      "recompute.yaml", {"model.attention.kind=mha", "model.attention.kv_heads=32"}));
  EXPECT_GT(rec.metrics["preemptions"].get<std::int64_t>(), 0);
  EXPECT_EQ(rec.metrics["bytes"]["host_to_device"].get<double>(), 0.0);
}

// ---- 7. Disaggregation ----------------------------------------------------------------------

TEST(ServingLaws, DisaggregatedRequestsDecodeAfterTheirKvMoves) {
  const Scenario s = load_scenario_text(
      scenario_text("{kind: serving, requests: 120, arrival: {process: poisson, rate_per_s: 200}, "
                    "prompt_tokens: {dist: uniform, min: 64, max: 900}, output_tokens: {dist: uniform, min: 1, max: 40}}",
                    "{max_num_seqs: 32, max_batched_tokens: 2048}", "deployment: {prefill_gpus: 4, decode_gpus: 4}\n"),
      "disagg.yaml");
  Rig rig(s);
  ASSERT_EQ(rig.pools.size(), 2u);
  ServingEngine engine(rig.setup(), rig.pools, generate_requests(s.serving_workload, s.seed));
  struct Move {
    Tick start, end;
    double bytes;
    int src, dst;
  };
  std::vector<Move> moves;
  std::vector<Tick> prefill_step_ends;
  engine.on_transfer([&](const TaskGraph& g, const std::vector<TaskTiming>& timing) {
    ASSERT_EQ(g.tasks().size(), 1u);
    const Task& t = g.tasks()[0];
    moves.push_back({timing[0].start, timing[0].end, t.bytes, t.src, t.dst});
  });
  engine.on_step([&](const StepRecord& st) {
    if (st.pool == 0) {
      prefill_step_ends.push_back(st.end);
      EXPECT_EQ(st.decode_tokens, 0) << "the prefill pool decodes nothing";
    } else {
      EXPECT_EQ(st.prefill_tokens, 0) << "the decode pool prefills nothing";
    }
  });
  engine.run();
  const double kvb = kv_cache_bytes_per_token(s.model);
  int multi = 0;
  double bytes = 0.0;
  for (const Request& r : engine.requests()) {
    ASSERT_EQ(r.state, RequestState::kFinished);
    EXPECT_EQ(static_cast<std::int64_t>(r.itl.size()), r.spec.output_tokens - 1);
    if (r.spec.output_tokens == 1) {
      EXPECT_LT(r.gpu, 4) << "a one-token request ends on its prefill GPU";
      continue;
    }
    ++multi;
    EXPECT_GE(r.gpu, 4);
    EXPECT_EQ(r.pool, 1);
    // Its first token is the end of its KV cache's move, which starts when a prefill step ends.
    const auto m = std::find_if(moves.begin(), moves.end(), [&](const Move& mv) {
      return mv.end == r.first_token && mv.bytes == static_cast<double>(r.spec.prompt_tokens) * kvb;
    });
    ASSERT_NE(m, moves.end()) << "request " << r.spec.id;
    EXPECT_GT(m->end, m->start);
    EXPECT_NE(std::find(prefill_step_ends.begin(), prefill_step_ends.end(), m->start), prefill_step_ends.end())
        << "request " << r.spec.id << ": its transfer starts at " << m->start;
    bytes += m->bytes;
  }
  EXPECT_GT(multi, 50);
  EXPECT_EQ(static_cast<int>(moves.size()), multi);
  double moved = 0.0;
  for (const Move& m : moves) moved += m.bytes;
  EXPECT_DOUBLE_EQ(moved, bytes);

  // The same through the run's metrics and requests.csv.
  const ServingRun run = serve(s);
  EXPECT_GE(run.metrics["bytes"]["intra_node"].get<double>(), moved);
  EXPECT_EQ(run.metrics["pools"].size(), 2u);
  for (const auto& row : run.rows) {
    if (row.at("output_tokens") == "1") continue;
    EXPECT_GE(std::stoi(row.at("gpu")), 4);
    EXPECT_EQ(row.at("pool"), "1");
  }
}

// Decode GPUs short of KV blocks preempt; a preempted request waits at the front of its queue and
// is prefilled again on its decode GPU (its KV left the prefill GPU), before any new hand-over
// takes the blocks it waits for. Hand-overs used to take them, and once a decode GPU's running
// requests were done the hand-overs queued behind the preempted request held every block: the
// run ended with "serving stalled: N requests never finished".
TEST(ServingLaws, DisaggregatedDecodePreemptionsUnderKvPressureEveryRequestFinishes) {
  const Scenario s = load_scenario_text(
      scenario_text("{kind: serving, requests: 100, arrival: {process: poisson, rate_per_s: 400}, "
                    "prompt_tokens: {dist: uniform, min: 256, max: 1024}, output_tokens: {dist: uniform, min: 64, max: 256}}",
                    "{max_num_seqs: 64, max_batched_tokens: 1024, kv_cache_free_memory_fraction: 0.001}",
                    "deployment: {prefill_gpus: 4, decode_gpus: 4}\n"),
      "disagg-kv-pressure.yaml");
  Rig rig(s);
  ASSERT_EQ(rig.pools.size(), 2u);
  ServingEngine engine(rig.setup(), rig.pools, generate_requests(s.serving_workload, s.seed));
  std::int64_t decode_preemptions = 0, decode_prefill_tokens = 0;
  engine.on_step([&](const StepRecord& st) {
    if (st.pool != 1) return;
    decode_preemptions += st.preemptions;
    decode_prefill_tokens += st.prefill_tokens;
  });
  ASSERT_NO_THROW(engine.run());
  std::printf("decode pool: %lld preemptions, %lld tokens prefilled again\n", static_cast<long long>(decode_preemptions),
              static_cast<long long>(decode_prefill_tokens));
  EXPECT_GT(engine.preemptions(), 0);
  EXPECT_GT(decode_preemptions, 0);
  EXPECT_GT(decode_prefill_tokens, 0);
  ASSERT_EQ(engine.requests().size(), 100u);
  for (const Request& r : engine.requests()) {
    ASSERT_EQ(r.state, RequestState::kFinished) << "request " << r.spec.id;
    EXPECT_EQ(r.generated, r.spec.output_tokens) << "request " << r.spec.id;
    EXPECT_EQ(static_cast<std::int64_t>(r.itl.size()), r.spec.output_tokens - 1) << "request " << r.spec.id;
  }
}

}  // namespace moesim
