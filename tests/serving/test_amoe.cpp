// AMoE (asynchronous expert parallelism) as the serving engine's layer-queue mode
// (serving/amoe/layer_queues.hpp): the three layer schedulers of §3.4 on hand-computed queues;
// one request on an idle deployment takes exactly the sum of its blocks' scheduling, compute and
// transfers; token conservation through the μ-queues and the token pool; determinism; the metrics
// every mode reports; and deployments refused at the policy entry.
#include <gtest/gtest.h>

#include <cstdio>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <set>
#include <string>

#include "app/run/run_context.hpp"
#include "app/scenario/scenario.hpp"
#include "app/run/layer_queue_deployment.hpp"
#include "app/run/serving_run.hpp"
#include "core/diagnostics.hpp"
#include "hardware/collectives.hpp"
#include "hardware/nccl_tuning.hpp"
#include "models/operators.hpp"
#include "serving/amoe/layer_queues.hpp"
#include "serving/engine.hpp"
#include "serving/amoe/layer_scheduler.hpp"
#include "serving/amoe/micro_batches.hpp"
#include "sim/network_backend.hpp"
#include "sim/simulator.hpp"

namespace moesim {
namespace {

using Pick = std::optional<std::pair<int, int>>;

// A Mixtral-8x7B cut to two blocks on 4 A100s: GPUs 0-1 attend, GPUs 2-3 host four experts each.
std::string scenario(const std::string& routing = "{kind: uniform}", const std::string& extra = "",
                     const std::string& scheduler = "defrag") {
  return "model: {preset: mixtral-8x7b, layers: 2}\n"
         "hardware: hgx-a100-4gpu-nvlink\n"
         "workload:\n"
         "  kind: serving\n"
         "  requests: 40\n"
         "  arrival: {process: poisson, rate_per_s: 200}\n"
         "  prompt_tokens: {dist: uniform, min: 16, max: 64}\n"
         "  output_tokens: {dist: uniform, min: 2, max: 12}\n"
         "  routing: " + routing + "\n"
         "policy: [{name: amoe, attention_gpus: 2, scheduler: " + scheduler + "}]\n" + extra;
}

/// A serving engine in layer-queue mode on the scenario's first policy, run to the end.
struct AmoeRun {
  Scenario s;
  std::unique_ptr<Cluster> cluster;
  std::unique_ptr<ComputeCostModel> cost;
  std::unique_ptr<RoutingModel> routing;
  LayerQueueDeployment d;
  std::vector<ServingPool> pools;  ///< none: the split has no pools
  std::unique_ptr<ServingEngine> engine;
  const LayerQueueRuntime& queues() const { return *engine->layer_queues(); }
};

AmoeRun make_run(const std::string& text, std::vector<RequestSpec> requests = {},
                 const std::vector<std::string>& sets = {}, std::uint64_t seed = 0) {
  AmoeRun r{load_scenario_text(text, "amoe.yaml", sets), nullptr, nullptr, nullptr, {}, {}, nullptr};
  r.cluster = std::make_unique<Cluster>(r.s.hardware);
  r.cost = std::make_unique<ComputeCostModel>(ComputeCostModel::for_cluster(r.s.hardware));
  r.routing = make_routing(r.s);
  r.d = layer_queue_deployment(r.s, r.s.policies.front());
  if (requests.empty()) requests = generate_requests(r.s.serving_workload, r.s.seed);
  ServingSetup setup = serving_setup(r.s, *r.cluster, *r.cost, *r.routing);
  if (seed != 0) setup.seed = seed;
  setup.layer_queues = &r.d;
  r.engine = std::make_unique<ServingEngine>(setup, r.pools, std::move(requests));
  r.engine->run();
  return r;
}

}  // namespace

TEST(AmoeLayerScheduler, MtfsFlfsAndDefragOnHandComputedQueues) {
  // One slot per block. mtfs: block 1 (10 tokens). flfs: block 0. defrag (K = 2, δ = 0.5):
  // block 0 scores 9 + 10·0.5 + 0·0.25 = 14, block 1 scores 10 + 0 + 0 = 10: block 0.
  const QueueDepths q = {{9}, {10}, {0}, {0}};
  EXPECT_EQ(pick_queue(LayerSchedule::kMtfs, q), (Pick{{1, 0}}));
  EXPECT_EQ(pick_queue(LayerSchedule::kFlfs, q), (Pick{{0, 0}}));
  EXPECT_EQ(pick_queue(LayerSchedule::kDefrag, q, {2, 0.5}), (Pick{{0, 0}}));
  // With no lookahead defrag is mtfs.
  EXPECT_EQ(pick_queue(LayerSchedule::kDefrag, q, {0, 0.5}), (Pick{{1, 0}}));
  // Two slots: lookahead divides by N_e; the lookahead wraps past the last block.
  // block 2: 8 + (5 + 0)/2·0.5 + 0 = 9.25 for both slots: the lower slot wins the tie.
  const QueueDepths two = {{5, 0}, {0, 0}, {8, 8}};
  EXPECT_EQ(pick_queue(LayerSchedule::kDefrag, two, {2, 0.5}), (Pick{{2, 0}}));
  EXPECT_EQ(pick_queue(LayerSchedule::kFlfs, two), (Pick{{0, 0}}));
  EXPECT_FALSE(pick_queue(LayerSchedule::kMtfs, QueueDepths{{0}, {0}}));
  LayerSchedule s{};
  EXPECT_TRUE(parse_layer_schedule("flfs", s));
  EXPECT_EQ(s, LayerSchedule::kFlfs);
  EXPECT_FALSE(parse_layer_schedule("fifo", s));
}

// One request of one prompt token and one output token, alone: per block, a scheduling decision,
// attention and router, the message to its expert's GPU (one NCCL send: LL's latency, 6.6 + 0.6 us
// over NVLink, then the bytes at LL's rate), a decision, the expert, and the message home.
// Top-1, so the token pool waits for one output.
TEST(AmoeLayerQueues, OneRequestOnAnIdleDeploymentTakesTheSumOfItsBlocks) {
  const AmoeRun run = make_run(scenario(), {RequestSpec{0, 0, 1, 1}}, {"model.top_k=1"}, 1);
  const Scenario& s = run.s;
  const Cluster& cluster = *run.cluster;
  const ComputeCostModel& cost = *run.cost;
  const LayerQueueDeployment& d = run.d;
  const Request& req = run.engine->requests().front();
  // The expected time: every expert GPU is one NVLink hop from every attention GPU in this preset.
  Simulator sim;
  auto net = make_network("flow", sim);
  cluster.install(*net);
  const auto path = cluster.route(cluster.gpu_endpoint(0), cluster.gpu_endpoint(2));
  Tick latency = 0;
  double bw = 1e300;
  for (LinkId l : path) {
    latency += net->link(l).latency;
    bw = std::min(bw, net->link(l).bandwidth_Bps);
  }
  const P2pPricing p2p = price_p2p(cluster, 0, 2, token_bytes(s.model));
  ASSERT_EQ(p2p.hop, HopLatency::kInLaunch);
  EXPECT_EQ(p2p.launch, us_to_ticks(6.6 + 0.6));                                    // NCCL ring/LL base + NVLink hop
  // LL moves half its lines' bytes as data: half the path's NCCL rate, at most llMaxBw (87.7 GB/s).
  const double ll_GBps = std::min(0.5 * nccl_path_GBps(cluster, 0, 2), 87.7);
  EXPECT_NEAR(token_bytes(s.model) * p2p.wire_scale / bw, token_bytes(s.model) / (ll_GBps * 1e9), 1e-15);
  (void)latency;
  const Tick message = p2p.launch + seconds_to_ticks(token_bytes(s.model) * p2p.wire_scale / bw);
  const Tick decide = us_to_ticks(d.config.schedule_us);
  Tick expected = 0;
  for (int b = 0; b < s.model.layers; ++b) {
    std::vector<Op> attn = attention_step_ops(s.model, std::vector<SeqChunk>{SeqChunk{1, 0}});
    const auto router = router_ops(s.model, 1);
    attn.insert(attn.end(), router.begin(), router.end());
    expected += decide + cost.ops_time(attn) + message + decide + cost.ops_time(expert_ops(s.model, {1})) + message;
  }
  EXPECT_EQ(req.first_token, req.finished);
  // 4 ticks: the executor carries a message's wire scale in single precision.
  EXPECT_NEAR(static_cast<double>(req.finished), static_cast<double>(expected), 4.0) << "ticks";
  EXPECT_EQ(run.queues().executions(), 2 * s.model.layers);
}

// AMoE's decisions are host work: on a host twice as fast, the one request's 2 decisions per block
// take half their schedule_us each, and nothing else moves.
TEST(AmoeLayerQueues, DecisionsArePricedByTheHostCostModel) {
  const AmoeRun base = make_run(scenario(), {RequestSpec{0, 0, 1, 1}}, {"model.top_k=1"}, 1);
  const AmoeRun fast = make_run(scenario(), {RequestSpec{0, 0, 1, 1}}, {"model.top_k=1", "hardware.host_speed=2"}, 1);
  const Tick saved = 2 * base.s.model.layers * (us_to_ticks(base.d.config.schedule_us) - us_to_ticks(base.d.config.schedule_us / 2));
  EXPECT_EQ(base.engine->requests().front().finished - fast.engine->requests().front().finished, saved);
}

// Every request's tokens pass every block's attention once per iteration (its prompt, then one
// token per further output), and each of them reaches exactly top-k experts per block.
TEST(AmoeLayerQueues, TokensAreConservedThroughQueuesAndTokenPool) {
  for (const std::string sched : {"defrag", "mtfs", "flfs", "pingpong-1", "pingpong-2", "pingpong-3"}) {
    const bool pp = sched.rfind("pingpong", 0) == 0;
    AmoeRun r = make_run(scenario("{kind: skewed, alpha: 0.6, hot_experts: 1}", "", pp ? "defrag" : sched), {},
                         pp ? std::vector<std::string>{"policy.0.micro_batches=" + sched.substr(9)}
                            : std::vector<std::string>{});
    std::int64_t per_block = 0;
    for (const Request& q : r.engine->requests()) {
      per_block += q.spec.prompt_tokens + q.spec.output_tokens - 1;
      EXPECT_EQ(q.generated, q.spec.output_tokens);
      EXPECT_EQ(static_cast<std::int64_t>(q.itl.size()), q.spec.output_tokens - 1);
    }
    for (int b = 0; b < r.s.model.layers; ++b) {
      EXPECT_EQ(r.queues().attention_tokens()[static_cast<std::size_t>(b)], per_block) << b;
      const auto& ex = r.queues().expert_arrivals()[static_cast<std::size_t>(b)];
      EXPECT_EQ(std::accumulate(ex.begin(), ex.end(), std::int64_t{0}), per_block * r.s.model.top_k) << b;
    }
  }
}

// Ping-pong's barrier (micro_batches.hpp): a micro-batch is ready at an attention GPU when all of
// its requests there have arrived, at an expert GPU when every attention GPU holding some of it has
// dispatched; an iteration ends with its last request.
TEST(AmoeMicroBatches, BarrierBookkeeping) {
  MicroBatchBarrier b(2, 4, 3, 2);  // attention GPUs 0-1, expert GPUs 2-3, 3 blocks, 2 micro-batches
  b.begin({{2, 1}, {0, 1}});        // GPU 0: 2 requests in m0, 1 in m1; GPU 1: 1 in m1
  EXPECT_TRUE(b.running());
  EXPECT_FALSE(b.attention_ready(0, 0, 0));
  b.attention_arrived(0, 0, 0);
  EXPECT_FALSE(b.attention_ready(0, 0, 0));
  b.attention_arrived(0, 0, 0);
  EXPECT_TRUE(b.attention_ready(0, 0, 0));
  EXPECT_FALSE(b.attention_ready(1, 0, 0));  // holds none of m0
  // m0 comes from GPU 0 only; m1 from both.
  b.message_arrived(2, 0, 0);
  EXPECT_TRUE(b.expert_ready(2, 0, 0));
  EXPECT_FALSE(b.expert_ready(3, 0, 0));
  b.message_arrived(2, 0, 1);
  EXPECT_FALSE(b.expert_ready(2, 0, 1));
  b.message_arrived(2, 0, 1);
  EXPECT_TRUE(b.expert_ready(2, 0, 1));
  EXPECT_FALSE(b.expert_ready(2, 1, 1));  // per block
  EXPECT_FALSE(b.finish_item());
  EXPECT_FALSE(b.finish_item());
  EXPECT_FALSE(b.finish_item());
  EXPECT_TRUE(b.finish_item());
  EXPECT_FALSE(b.running());
}

// Alone, one token per block (a one-token prompt, top-1) meets no barrier it must wait for and no
// choice of order: one micro-batch takes exactly AMoE's time. (With more tokens, an expert GPU's
// order over its experts may differ between the two.)
TEST(AmoeMicroBatches, OneRequestAloneTakesTheSameTimeAsAsynchronous) {
  const std::vector<RequestSpec> one = {RequestSpec{0, 0, 1, 3}};
  const AmoeRun async = make_run(scenario(), one, {"model.top_k=1"});
  const AmoeRun pp = make_run(scenario(), one, {"model.top_k=1", "policy.0.micro_batches=1"});
  EXPECT_EQ(async.engine->requests().front().finished, pp.engine->requests().front().finished);
  EXPECT_EQ(async.engine->requests().front().itl_ms(async.engine->inter_token_gaps()),
            pp.engine->requests().front().itl_ms(pp.engine->inter_token_gaps()));
}

// AMoE's load balancer (§3.1) binds a new request to the attention GPU with the most free KV
// blocks; `fewest-requests` counts requests instead. A long request on GPU 0 sends the next two
// short ones to GPU 1 by free blocks, but alternates them by request count.
TEST(AmoeLayerQueues, AttentionPlacementOptions) {
  const std::vector<RequestSpec> three = {RequestSpec{0, 0, 1000, 100}, RequestSpec{1, 0, 20, 5}, RequestSpec{2, 0, 20, 5}};
  const AmoeRun kv = make_run(scenario(), three);
  EXPECT_EQ(kv.engine->requests()[1].rank, 1);
  EXPECT_EQ(kv.engine->requests()[2].rank, 1);
  const AmoeRun count = make_run(scenario(), three, {"policy.0.attention_placement=fewest-requests"});
  EXPECT_EQ(count.engine->requests()[0].rank, 0);
  EXPECT_EQ(count.engine->requests()[1].rank, 1);
  EXPECT_EQ(count.engine->requests()[2].rank, 0);
}

TEST(AmoeLayerQueues, SchedulersRunAndResultsAreDeterministic) {
  for (const std::string sched : {"defrag", "mtfs", "flfs"}) {
    const std::string text = scenario("{kind: skewed, alpha: 0.6, hot_experts: 1}");
    Scenario s = load_scenario_text(text, "amoe.yaml", {"policy.0.scheduler=" + sched});
    std::string csv1, csv2;
    const auto a = run_serving(s, s.policies.front(), s.predictors.front(), "", csv1);
    const auto b = run_serving(s, s.policies.front(), s.predictors.front(), "", csv2);
    EXPECT_EQ(a.dump(), b.dump()) << sched;
    EXPECT_EQ(csv1, csv2) << sched;
    EXPECT_GT(a["metrics"]["throughput_tokens_per_s"].get<double>(), 0.0) << sched;
  }
}

TEST(AmoeScenario, BadDeploymentsAreErrorsAtThePolicyEntry) {
  auto error_of = [](const std::string& text, const std::vector<std::string>& sets = {}) -> std::string {
    try {
      Scenario s = load_scenario_text(text, "amoe.yaml", sets);
      for (const auto& e : s.policies) layer_queue_deployment(s, e);
    } catch (const InputError& e) {
      return e.diagnostics().front().to_string();
    }
    return "";
  };
  EXPECT_NE(error_of(scenario(), {"policy.0.attention_gpus=4"}).find("leaves no expert GPU"), std::string::npos);
  EXPECT_NE(error_of(scenario(), {"policy.0.attention_gpus=9"}).find("leaves no expert GPU"), std::string::npos);
  EXPECT_NE(error_of(scenario(), {"policy.0.scheduler=fifo"}).find("fifo"), std::string::npos);
  EXPECT_NE(error_of(scenario(), {"hardware.gpu.memory_GB=2"}).find("experts of every block"), std::string::npos);
  const std::string prefill = error_of("model: mixtral-8x7b\nhardware: hgx-a100-4gpu-nvlink\npolicy: amoe\n");
  EXPECT_NE(prefill.find("amoe.yaml:3:"), std::string::npos) << prefill;
  EXPECT_NE(prefill.find("serving workloads only"), std::string::npos) << prefill;
  EXPECT_NE(error_of(scenario("{kind: uniform}", "predictor: distribution-only\n")).find("no expert-load predictor"),
            std::string::npos);
}

}  // namespace moesim

namespace moesim {
namespace {

// Mixtral-8x7B cut to 8 blocks, MQA, top-1, exponential skew, on 4 A100s (2 attention + 2 expert
// GPUs for AMoE), short requests at `rate` per second.
Scenario small_serving(double rate) {
  const std::string text =
      "model: {preset: mixtral-8x7b, layers: 8, top_k: 1, attention: {kind: mqa, kv_heads: 1}}\n"
      "hardware: hgx-a100-4gpu-nvlink\n"
      "workload:\n"
      "  kind: serving\n"
      "  requests: 600\n"
      "  warmup_requests: 100\n"
      "  arrival: {process: poisson, rate_per_s: 1}\n"
      "  prompt_tokens: {dist: uniform, min: 30, max: 70}\n"
      "  output_tokens: {dist: uniform, min: 30, max: 60}\n"
      "  routing: {kind: exponential, lambda: 0.5}\n"
      "policy:\n"
      "  - static-ep\n"
      "  - {name: amoe, label: defrag, attention_gpus: 2, scheduler: defrag}\n"
      "  - {name: amoe, label: flfs, attention_gpus: 2, scheduler: flfs}\n";
  return load_scenario_text(text, "small.yaml", {"workload.arrival.rate_per_s=" + std::to_string(rate)});
}

double metric(const nlohmann::json& run, const char* key) { return run["metrics"][key].get<double>(); }

}  // namespace

// At low load every deployment keeps up with what arrives: AMoE (defrag) and the synchronous
// baseline deliver the same throughput within 10%.
TEST(AmoeServing, DefragAndTheBaselineAgreeAtLowLoad) {
  const Scenario s = small_serving(5);
  std::string csv;
  const auto base = run_serving(s, s.policies[0], s.predictors.front(), "", csv);
  const auto amoe = run_serving(s, s.policies[1], s.predictors.front(), "", csv);
  EXPECT_NEAR(metric(amoe, "throughput_tokens_per_s") / metric(base, "throughput_tokens_per_s"), 1.0, 0.10);
  EXPECT_NEAR(metric(amoe, "request_rate_per_s") / metric(base, "request_rate_per_s"), 1.0, 0.10);
}

// AMoE §5.3, Fig. 12: under continuous arrivals FLFS keeps running the earliest block, so new
// prompts starve the decode tokens further on and almost no request completes, while defrag still
// completes requests at a good fraction of the arrival rate.
TEST(AmoeServing, FlfsLivelocksUnderContinuousArrivals) {
  const Scenario s = small_serving(400);
  std::string csv;
  const auto defrag = run_serving(s, s.policies[1], s.predictors.front(), "", csv);
  const auto flfs = run_serving(s, s.policies[2], s.predictors.front(), "", csv);
  // Both fall behind 400 requests/s, so neither is steady and their rates are taken to the last
  // completion (issue 30), after arrivals stop and FLFS drains quickly. The livelock is in what
  // they complete while requests keep arriving: the window's served fraction.
  const auto served = [](const nlohmann::json& run) {
    return run["metrics"]["measurement_window"]["served_fraction"].get<double>();
  };
  EXPECT_GT(served(defrag), 0.1);  // over 40 of each 400 arriving per second
  EXPECT_LT(served(flfs), 0.1 * served(defrag));
  std::printf("served while arriving: defrag %.3f, flfs %.4f\n", served(defrag), served(flfs));
}

}  // namespace moesim

namespace moesim {
namespace {

/// The keys of a JSON object and of every object inside it ("steps.count", ...), arrays' insides left out.
void key_paths(const nlohmann::json& j, const std::string& prefix, std::set<std::string>& out) {
  if (!j.is_object()) return;
  for (const auto& [k, v] : j.items()) {
    out.insert(prefix + k);
    key_paths(v, prefix + k + ".", out);
  }
}

}  // namespace

// Issue 29: one serving engine, whose every mode reports the same metrics, nested keys included:
// colocated and disaggregated steps, AMoE's asynchronous layer queues and ping-pong. The
// layer-queue modes measure what the stepped ones do: bytes on the wire, all-to-all time (per
// message), routing skew, and their executions as steps; and they write a Chrome trace.
TEST(ServingModes, EveryModeReportsTheSameMetricSet) {
  const std::string text = scenario("{kind: skewed, alpha: 0.6, hot_experts: 1}") +
                           "output: {trace: true}\n";
  const std::vector<std::pair<std::string, std::vector<std::string>>> modes = {
      {"colocated", {"policy=static-ep"}},
      {"disaggregated", {"policy=static-ep", "deployment.prefill_gpus=2", "deployment.decode_gpus=2"}},
      {"layer queues", {}},
      {"ping-pong", {"policy.0.micro_batches=2"}}};
  const std::string dir = ::testing::TempDir() + "/moesim-modes";
  std::filesystem::create_directories(dir);
  std::set<std::string> first;
  for (const auto& [mode, sets] : modes) {
    const Scenario s = load_scenario_text(text, "modes.yaml", sets);
    std::string csv;
    const nlohmann::json run = run_serving(s, s.policies.front(), s.predictors.front(), dir, csv);
    std::set<std::string> keys;
    key_paths(run["metrics"], "", keys);
    if (first.empty()) first = keys;
    EXPECT_EQ(keys, first) << mode;
    const nlohmann::json& m = run["metrics"];
    EXPECT_GT(m["bytes"]["intra_node"].get<double>(), 0.0) << mode;
    EXPECT_GT(m["alltoall_ms"].get<double>(), 0.0) << mode;
    EXPECT_GT(m["load"]["skewness"].get<double>(), 0.0) << mode;
    EXPECT_GT(m["steps"]["count"].get<std::int64_t>(), 0) << mode;
    EXPECT_GT(m["steps"]["prefill_tokens"].get<std::int64_t>(), 0) << mode;
    EXPECT_GT(m["gpu_time_breakdown"]["mean_fraction"]["communication"].get<double>(), 0.0) << mode;
    ASSERT_TRUE(run.contains("trace")) << mode;
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(dir) / run["trace"].get<std::string>())) << mode;
  }
}

// In layer-queue mode the tokens entering block 0 are every request's prompt once and each
// further output token once: the steps' prefill and decode tokens count exactly those.
TEST(ServingModes, LayerQueueStepsCountTheTokensEnteringTheModel) {
  const Scenario s = load_scenario_text(scenario(), "amoe.yaml");
  std::string csv;
  const nlohmann::json run = run_serving(s, s.policies.front(), s.predictors.front(), "", csv);
  std::int64_t prompts = 0, decodes = 0;
  for (const RequestSpec& r : generate_requests(s.serving_workload, s.seed)) {
    prompts += r.prompt_tokens;
    decodes += r.output_tokens - 1;
  }
  EXPECT_EQ(run["metrics"]["steps"]["prefill_tokens"].get<std::int64_t>(), prompts);
  EXPECT_EQ(run["metrics"]["steps"]["decode_tokens"].get<std::int64_t>(), decodes);
  EXPECT_EQ(run["metrics"]["pools"].size(), 2u);
  EXPECT_EQ(run["metrics"]["pools"][0]["gpus"].get<int>(), 2);
}

}  // namespace moesim

namespace moesim {

// Issue 29: attention-FFN disaggregation is a deployment like the others. deployment:
// {attention_gpus, expert_gpus} with policy amoe runs exactly what the policy's own
// attention_gpus ran; the split refuses stepped policies, a second split, and GPU counts that
// are not the cluster's, each at its key.
TEST(AttentionExpertSplit, TheDeploymentFormRunsWhatThePolicyFormRan) {
  const std::string base = scenario();  // policy amoe, attention_gpus: 2 on 4 GPUs
  const Scenario by_policy = load_scenario_text(base, "amoe.yaml");
  const Scenario by_deployment =
      load_scenario_text(base, "amoe.yaml", {"policy.0.attention_gpus=0", "deployment.attention_gpus=2",
                                              "deployment.expert_gpus=2"});
  std::string csv_a, csv_b;
  const auto a = run_serving(by_policy, by_policy.policies.front(), by_policy.predictors.front(), "", csv_a);
  const auto b = run_serving(by_deployment, by_deployment.policies.front(), by_deployment.predictors.front(), "", csv_b);
  EXPECT_EQ(a["metrics"].dump(), b["metrics"].dump());
  EXPECT_EQ(csv_a, csv_b);
  EXPECT_EQ(b["metrics"]["pools"][0]["gpus"].get<int>(), 2);
}

TEST(AttentionExpertSplit, BadSplitsAreErrorsAtTheirKeys) {
  const auto errors = [](const std::vector<std::string>& sets) -> std::string {
    try {
      load_scenario_text(scenario(), "amoe.yaml", sets);
    } catch (const InputError& e) {
      std::string all;
      for (const auto& d : e.diagnostics()) all += d.to_string() + "\n";
      return all;
    }
    return "";
  };
  const std::string split = "deployment.attention_gpus=2";
  EXPECT_NE(errors({split}).find("'expert_gpus' is 0 but 'attention_gpus' is not"), std::string::npos);
  EXPECT_NE(errors({split, "deployment.expert_gpus=1"}).find("must be the cluster's 4 GPUs"), std::string::npos);
  EXPECT_NE(errors({split, "deployment.expert_gpus=2"}).find("the split is given twice"), std::string::npos);
  EXPECT_NE(errors({split, "deployment.expert_gpus=2", "policy=static-ep"}).find("layer-queue mode: use policy amoe"),
            std::string::npos);
  EXPECT_NE(errors({split, "deployment.expert_gpus=2", "policy.0.attention_gpus=0", "deployment.tensor_parallel=2"})
                .find("'tensor_parallel' does not apply to an attention-FFN split"),
            std::string::npos);
  EXPECT_EQ(errors({split, "deployment.expert_gpus=2", "policy.0.attention_gpus=0"}), "");
}

}  // namespace moesim
