// Deployments as engines configure them (issue 25): tensor-parallel attention groups with their
// all-reduces, tensor-parallel experts, instances, per-GPU KV capacity under TP and kv_dtype,
// prompt-cached requests, CUDA-graph padding, host time, reserve-full admission — each against a
// closed form or a law, on small runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "app/run/run_context.hpp"
#include "app/scenario/scenario.hpp"
#include "app/run/serving_run.hpp"
#include "hardware/cost_model.hpp"
#include "models/operators.hpp"
#include "serving/engine.hpp"
#include "serving/pool.hpp"
#include "serving/step_planner.hpp"
#include "tests/support/policy_fixtures.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

using testing_support::bytes_into;
using testing_support::ops_of_phase;

// Mixtral-8x7B cut to 2 layers (32 heads, 8 KV heads, 8 experts top-2) on one DGX H100.
std::string scenario(const std::string& workload, const std::string& deployment, const std::string& serving = "{}",
                     const std::string& policy = "static-ep", const std::string& model_extra = "") {
  return "name: deployments\n"
         "seed: 5\n"
         "model: {preset: mixtral-8x7b, layers: 2" + model_extra + "}\n"
         "hardware: dgx-h100\n"
         "workload: " + workload + "\n"
         "serving: " + serving + "\n"
         "deployment: " + deployment + "\n"
         "policy: " + policy + "\n"
         "predictor: none\n";
}

const std::string kDecodeBatch =
    "{kind: serving, requests: 8, arrival: {process: closed, clients: 8}, prompt_tokens: 256, output_tokens: 4, "
    "routing: {kind: uniform}}";

double flops_named(const std::vector<Op>& ops, const std::string& prefix) {
  double f = 0.0;
  for (const Op& op : ops)
    if (std::string(op.name).rfind(prefix, 0) == 0) f += op.flops;
  return f;
}

nlohmann::json serve(const Scenario& s) {
  std::string csv;
  return run_serving(s, s.policies.front(), s.predictors.front(), "", csv)["metrics"];
}

// A serving engine on the scenario's pools, set up as `moesim run` sets it up, for observing steps.
struct EngineRig {
  Cluster cluster;
  ComputeCostModel cost;
  std::unique_ptr<RoutingModel> routing;
  std::vector<ServingPool> pools;
  ServingEngine engine;
  explicit EngineRig(const Scenario& s)
      : cluster(s.hardware),
        cost(ComputeCostModel::for_cluster(s.hardware)),
        routing(make_routing(s)),
        pools(make_serving_pools(s, cluster, *routing, s.policies.front(), s.predictors.front())),
        engine(serving_setup(s, cluster, cost, *routing), pools, generate_requests(s.serving_workload, s.seed)) {}
};

// Plans one step of `shape` on the scenario's first pool with a uniform routing.
StepPlan plan_on_pool(const Scenario& s, const StepShape& shape) {
  const Cluster cluster(s.hardware);
  const auto routing = make_routing(s);
  std::vector<ServingPool> pools = make_serving_pools(s, cluster, *routing, s.policies.front(), s.predictors.front());
  const ServingPool& pool = pools.front();
  const std::vector<std::int64_t> home = shape.home_tokens();
  std::vector<LayerRouting> layers;
  for (int l = 0; l < s.model.num_moe_layers(); ++l) {
    Rng rng(7);
    layers.push_back(routing->route_counts(0, l, home, rng));
  }
  return plan_step(*pool.policy, *pool.ctx, 0, shape, layers);
}

}  // namespace

// A TP-2 group's decode step: each GPU runs attention at half the heads (half the QKV, core and
// output FLOPs of one GPU alone), the experts at half their FFN width, and the group all-reduces
// the hidden state twice per layer (after attention, after the MoE block): a ring all-reduce of
// B bytes brings each of 2 GPUs 2·(2−1)/2·B = B, so 2B per layer.
TEST(Deployments, TensorParallelPairRunsHalfTheHeadsAndExpertsWithTwoAllReducesPerLayer) {
  const Scenario tp1 = load_scenario_text(
      scenario(kDecodeBatch, "{tensor_parallel: 1, expert_parallel: false, instances: 1}", "{}", "tp-experts"), "tp1.yaml");
  const Scenario tp2 = load_scenario_text(
      scenario(kDecodeBatch, "{tensor_parallel: 2, expert_parallel: false, instances: 1}", "{}", "tp-experts"), "tp2.yaml");
  const std::int64_t seqs = 6, context = 300;
  auto shape_of = [&](int tp) {
    StepShape shape;
    shape.seqs.resize(static_cast<std::size_t>(tp));
    shape.seqs[0].assign(static_cast<std::size_t>(seqs), SeqChunk{1, context});
    shape.attention_tp = tp;
    shape.tp_experts = true;
    return shape;
  };
  const StepPlan one = plan_on_pool(tp1, shape_of(1));
  const StepPlan two = plan_on_pool(tp2, shape_of(2));
  const Cluster pair(pool_spec(tp2.hardware, 0, 2));
  const double B = static_cast<double>(seqs) * token_bytes(tp2.model);
  for (int layer = 0; layer < 2; ++layer) {
    const auto a1 = ops_of_phase(one.graph, phase::kAttention, layer, 1);
    const auto a2 = ops_of_phase(two.graph, phase::kAttention, layer, 2);
    const auto e1 = ops_of_phase(one.graph, phase::kExperts, layer, 1);
    const auto e2 = ops_of_phase(two.graph, phase::kExperts, layer, 2);
    for (int g = 0; g < 2; ++g) {
      for (const std::string name : {"attn.qkv", "attn.core", "attn.out"})
        EXPECT_NEAR(flops_named(a2[static_cast<std::size_t>(g)], name), flops_named(a1[0], name) / 2,
                    1e-9 * flops_named(a1[0], name)) << name << " GPU " << g;
      ASSERT_GT(flops_named(e1[0], "expert_shard"), 0.0);
      EXPECT_NEAR(flops_named(e2[static_cast<std::size_t>(g)], "expert_shard"), flops_named(e1[0], "expert_shard") / 2,
                  1e-9 * flops_named(e1[0], "expert_shard")) << "GPU " << g;
      // The router runs on every token on both GPUs (its input is the all-reduced hidden state).
      EXPECT_DOUBLE_EQ(flops_named(e2[static_cast<std::size_t>(g)], "router"), flops_named(e1[0], "router"));
    }
    const auto into_attention = bytes_into(two.graph, pair, phase::kCollective, layer);
    const auto into_moe = bytes_into(two.graph, pair, phase::kCombine, layer);
    for (int g = 0; g < 2; ++g) {
      EXPECT_NEAR(into_attention[static_cast<std::size_t>(g)], B, 1e-9 * B) << "layer " << layer << " GPU " << g;
      EXPECT_NEAR(into_moe[static_cast<std::size_t>(g)], B, 1e-9 * B) << "layer " << layer << " GPU " << g;
    }
    // One GPU alone moves nothing.
    EXPECT_TRUE(bytes_into(one.graph, Cluster(pool_spec(tp1.hardware, 0, 1)), phase::kCollective, layer) ==
                std::vector<double>{0.0});
  }
}

// KV capacity per GPU: 8 KV heads split over TP (so TP 2 halves a token's bytes per GPU, TP 16
// would replicate one head each), fp8 KV halves bf16's bytes, and MLA's latent is replicated
// (DeepSeek-V3 under TP keeps the whole latent on every GPU, why engines run it with DP attention).
TEST(Deployments, KvBytesPerGpuFollowKvHeadsOverTpAndKvDtype) {
  ModelSpec mixtral = model_presets().get("mixtral-8x7b").value;
  const double one = kv_cache_bytes_per_token_gpu(mixtral, 1);
  EXPECT_DOUBLE_EQ(one, 32.0 * 2 * 8 * 128 * 2);  // layers · K and V · KV heads · head_dim · bf16
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token_gpu(mixtral, 2), one / 2);
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token_gpu(mixtral, 8), one / 8);
  mixtral.kv_dtype = DType::kFp8;
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token_gpu(mixtral, 2), one / 4);
  const ModelSpec dsv3 = model_presets().get("deepseek-v3").value;
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token_gpu(dsv3, 8), kv_cache_bytes_per_token_gpu(dsv3, 1));

  // The pools' blocks follow: TP 2 holds the same tokens in half the bytes per GPU, and the
  // memory left for them grows by the non-expert weights' half that each GPU no longer holds.
  const Scenario s1 = load_scenario_text(scenario(kDecodeBatch, "{tensor_parallel: 1, instances: 1, data_parallel: 1}"), "a.yaml");
  const Scenario s2 = load_scenario_text(scenario(kDecodeBatch, "{tensor_parallel: 2, data_parallel: 1, instances: 1}"), "b.yaml");
  const Scenario s2fp8 = load_scenario_text(
      scenario(kDecodeBatch, "{tensor_parallel: 2, data_parallel: 1, instances: 1}", "{}", "static-ep", ", kv_dtype: fp8"), "c.yaml");
  const Cluster cluster(s1.hardware);
  const auto routing = make_routing(s1);
  const auto blocks = [&](const Scenario& s) {
    return make_serving_pools(s, cluster, *routing, s.policies.front(), s.predictors.front()).front().kv_blocks;
  };
  const auto b1 = blocks(s1), b2 = blocks(s2), b2fp8 = blocks(s2fp8);
  ASSERT_EQ(b1.size(), 1u);
  ASSERT_EQ(b2.size(), 1u);  // one rank: a group of two GPUs
  EXPECT_GT(b2[0], 2 * b1[0]);
  EXPECT_NEAR(static_cast<double>(b2fp8[0]), 2.0 * static_cast<double>(b2[0]), 1.0);
}

// Requests whose prompts are already cached never run a prefill step: every step is decode
// only, each request gives all its output tokens, and nothing is computed twice.
TEST(Deployments, PromptCachedRequestsNeverRunAPrefillStep) {
  const Scenario s = load_scenario_text(
      scenario("{kind: serving, requests: 12, arrival: {process: closed, clients: 12}, prompt_tokens: 2000, "
               "output_tokens: 5, prompt_cached: true, routing: {kind: uniform}}",
               "{tensor_parallel: 1}"),
      "cached.yaml");
  const nlohmann::json m = serve(s);
  EXPECT_EQ(m["steps"]["prefill_tokens"].get<std::int64_t>(), 0);
  EXPECT_EQ(m["steps"]["decode_tokens"].get<std::int64_t>(), 12 * 5);
  EXPECT_EQ(m["requests_completed"].get<std::int64_t>(), 12);
  // Without the cache the same requests prefill 12 × 2000 tokens.
  const Scenario cold = load_scenario_text(
      scenario("{kind: serving, requests: 12, arrival: {process: closed, clients: 12}, prompt_tokens: 2000, "
               "output_tokens: 5, routing: {kind: uniform}}",
               "{tensor_parallel: 1}"),
      "cold.yaml");
  EXPECT_EQ(serve(cold)["steps"]["prefill_tokens"].get<std::int64_t>(), 12 * 2000);
}

// A decode batch of 3 on an engine that captured only size 4 replays the size-4 graph: the step
// runs 4 rows through every GEMM (the padding row attends one cached position), and its kernels
// pay the graph's per-kernel cost instead of the eager launch.
TEST(Deployments, CudaGraphPadsADecodeBatchOfThreeToTheCapturedFour) {
  const std::string wl =
      "{kind: serving, requests: 3, arrival: {process: closed, clients: 3}, prompt_tokens: 64, output_tokens: 3, "
      "prompt_cached: true, routing: {kind: uniform}}";
  const std::string engine_yaml =
      "{engine: {preset: vllm, graph_batch_sizes: [4], graph_kernel_us: 1, host_step_us: 0, host_per_seq_us: 0}}";
  const Scenario s = load_scenario_text(scenario(wl, "{tensor_parallel: 1, instances: 1, data_parallel: 1}", engine_yaml), "g.yaml");
  EngineRig rig(s);
  const Cluster& cluster = rig.cluster;
  const ComputeCostModel& cost = rig.cost;
  ServingEngine& engine = rig.engine;
  int checked = 0;
  engine.on_step([&](const StepRecord& rec) {
    const auto attn = ops_of_phase(rec.plan->graph, phase::kAttention, 0, cluster.num_gpus());
    ASSERT_FALSE(attn[0].empty());
    const Op& qkv = attn[0].front().name == std::string("attn.norm") ? attn[0][1] : attn[0][0];
    EXPECT_EQ(qkv.m, 4) << "rows of " << qkv.name;
    // The attention task's time is the padded batch's ops at the graph's kernel cost.
    std::vector<SeqChunk> padded;
    for (int i = 0; i < 3; ++i) padded.push_back(SeqChunk{1, 64 + rec.step});
    padded.push_back(SeqChunk{1, 1});
    const Tick expect = cost.ops_time(attention_step_ops(s.model, padded), 1.0);
    for (std::size_t t = 0; t < rec.plan->graph.tasks().size(); ++t) {
      const Task& task = rec.plan->graph.tasks()[t];
      if (task.kind == TaskKind::kCompute && task.phase == phase::kAttention && task.layer == 0 && task.gpu == 0) {
        EXPECT_EQ((*rec.timing)[t].end - (*rec.timing)[t].start, expect);
      }
    }
    ++checked;
  });
  engine.run();
  EXPECT_EQ(checked, 3);
}

// Host time before every step (no overlap) lengthens each step by exactly that much; with the
// overlap scheduler a step lasts the longer of its GPU time and its host time; serial host time
// lengthens every step, overlap or not.
TEST(Deployments, HostTimeAddsToEachStepUnlessOverlapped) {
  const std::string wl =
      "{kind: serving, requests: 4, arrival: {process: closed, clients: 4}, prompt_tokens: 64, output_tokens: 6, "
      "prompt_cached: true, routing: {kind: uniform}}";
  const auto mean_step = [&](const std::string& engine) {
    const Scenario s = load_scenario_text(scenario(wl, "{tensor_parallel: 1, instances: 1, data_parallel: 1}", engine), "h.yaml");
    return serve(s)["steps"]["step_ms"]["mean"].get<double>();
  };
  const double bare = mean_step("{engine: none}");
  const double serial = mean_step("{engine: {preset: trtllm, host_step_us: 2000}}");
  const double hidden = mean_step("{engine: {preset: trtllm, host_step_us: 2000, host_overlap: true}}");
  const double long_host = mean_step("{engine: {preset: trtllm, host_step_us: 200000, host_overlap: true}}");
  // Serial host time is never hidden, graph replay or not.
  const double unhidden = mean_step("{engine: {preset: trtllm, host_serial_us: 2000, host_overlap: true}}");
  const std::string graphs = "{engine: {preset: vllm, graph_batch_sizes: [4], host_overlap: true, host_serial_us: ";
  EXPECT_NEAR(mean_step(graphs + "2000}}"), mean_step(graphs + "0}}") + 2.0, 1e-6);
  EXPECT_NEAR(unhidden, bare + 2.0, 1e-6);
  EXPECT_NEAR(serial, bare + 2.0, 1e-6);
  EXPECT_NEAR(hidden, std::max(bare, 2.0), 1e-6);
  EXPECT_NEAR(long_host, 200.0, 1e-6);
}

// The eager issue of a step's kernels (serving.engine.eager_layer_us, eager_moe_layer_us) adds
// layers x the one + MoE layers x the other to every step that launches its kernels one by one,
// overlap scheduler or not (it hides the next step's scheduling, not this issue), and nothing to
// a step that replays a CUDA graph.
TEST(Deployments, EagerIssueTimeAddsToEagerStepsOnly) {
  const std::string wl =
      "{kind: serving, requests: 4, arrival: {process: closed, clients: 4}, prompt_tokens: 64, output_tokens: 6, "
      "prompt_cached: true, routing: {kind: uniform}}";
  const auto mean_step = [&](const std::string& engine) {
    const Scenario s = load_scenario_text(scenario(wl, "{tensor_parallel: 1, instances: 1, data_parallel: 1}", engine), "e.yaml");
    return serve(s)["steps"]["step_ms"]["mean"].get<double>();
  };
  // Two layers, both MoE (Mixtral cut to 2): 2 x 1000 us + 2 x 500 us per eager step.
  const double eager = mean_step("{engine: {preset: trtllm}}");
  EXPECT_NEAR(mean_step("{engine: {preset: trtllm, eager_layer_us: 1000}}"), eager + 2.0, 1e-6);
  EXPECT_NEAR(mean_step("{engine: {preset: trtllm, eager_layer_us: 1000, eager_moe_layer_us: 500}}"), eager + 3.0, 1e-6);
  EXPECT_NEAR(mean_step("{engine: {preset: trtllm, eager_layer_us: 1000, host_overlap: true}}"), eager + 2.0, 1e-6);
  // Four decodes fit the captured size 4: every step replays the graph.
  const std::string graphs = "{engine: {preset: vllm, graph_batch_sizes: [4]";
  EXPECT_DOUBLE_EQ(mean_step(graphs + ", eager_layer_us: 1000, eager_moe_layer_us: 500}}"), mean_step(graphs + "}}"));
}

// Reserve-full admission (TensorRT-LLM) holds each request's whole KV at admission: it never
// preempts, where on-demand blocks run more requests at once and preempt when outputs are long.
TEST(Deployments, ReserveFullAdmissionNeverPreemptsWhereOnDemandDoes) {
  const std::string wl =
      "{kind: serving, requests: 64, arrival: {process: closed, clients: 64}, prompt_tokens: 32, output_tokens: 480, "
      "routing: {kind: uniform}}";
  // A KV cache of ~9k tokens (0.1% of what is left after the weights): 17 whole requests.
  const auto run = [&](const std::string& admission) {
    const Scenario s = load_scenario_text(
        scenario(wl, "{tensor_parallel: 1, instances: 1, data_parallel: 1}",
                 "{admission: " + admission + ", kv_cache_free_memory_fraction: 0.001}"),
        "r.yaml");
    return serve(s);
  };
  const nlohmann::json reserve = run("reserve-full");
  const nlohmann::json demand = run("on-demand");
  EXPECT_EQ(reserve["preemptions"].get<std::int64_t>(), 0);
  EXPECT_GT(demand["preemptions"].get<std::int64_t>(), 0);
  EXPECT_EQ(reserve["requests_completed"].get<std::int64_t>(), 64);
  EXPECT_EQ(demand["requests_completed"].get<std::int64_t>(), 64);
}

// Prefill-first (SGLang): a step either prefills or decodes, never both; mixed steps (vLLM,
// TensorRT-LLM) carry decodes and prompt chunks together once requests overlap.
TEST(Deployments, PrefillFirstStepsNeverMixPrefillAndDecode) {
  const std::string wl =
      "{kind: serving, requests: 40, arrival: {process: poisson, rate_per_s: 200}, prompt_tokens: 300, "
      "output_tokens: 20, routing: {kind: uniform}}";
  const auto mixed_steps = [&](const std::string& step_mix) {
    const Scenario s = load_scenario_text(
        scenario(wl, "{tensor_parallel: 1, instances: 1, data_parallel: 1}", "{step_mix: " + step_mix + "}"), "m.yaml");
    EngineRig rig(s);
    ServingEngine& engine = rig.engine;
    int mixed = 0;
    engine.on_step([&](const StepRecord& rec) { mixed += rec.prefill_tokens > 0 && rec.decode_tokens > 0; });
    engine.run();
    EXPECT_EQ(engine.requests().size(), 40u);
    return mixed;
  };
  EXPECT_EQ(mixed_steps("prefill-first"), 0);
  EXPECT_GT(mixed_steps("mixed"), 0);
}

// Independent instances at the same load each: twice the instances, twice the clients, about
// twice the throughput (the instances share nothing but the node's idle links).
TEST(Deployments, ThroughputRisesWithInstancesAtFixedLoadPerInstance) {
  const auto tput = [&](int instances) {
    const std::string n = std::to_string(16 * instances);
    const Scenario s = load_scenario_text(
        scenario("{kind: serving, requests: " + n + ", arrival: {process: closed, clients: " + n +
                     "}, prompt_tokens: 128, output_tokens: 16, routing: {kind: uniform}}",
                 "{tensor_parallel: 2, data_parallel: 1, instances: " + std::to_string(instances) + "}"),
        "i.yaml");
    return serve(s)["throughput_tokens_per_s"].get<double>();
  };
  const double one = tput(1), two = tput(2), four = tput(4);
  EXPECT_NEAR(two / one, 2.0, 0.1);
  EXPECT_NEAR(four / one, 4.0, 0.2);
}

// The default deployment written out (data-parallel attention on every GPU, expert parallel by
// the policy, one instance) and serving.engine: none give byte-identical metrics to writing
// nothing: the new parts are off unless asked for.
TEST(Deployments, DefaultDeploymentWrittenOutIsByteIdentical) {
  const std::string wl =
      "{kind: serving, requests: 30, warmup_requests: 3, arrival: {process: poisson, rate_per_s: 40}, "
      "prompt_tokens: {dist: uniform, min: 32, max: 300}, output_tokens: {dist: uniform, min: 4, max: 40}, "
      "routing: {kind: zipf, s: 0.8}}";
  const Scenario plain = load_scenario_text(scenario(wl, "{}"), "p.yaml");
  const Scenario spelled = load_scenario_text(
      scenario(wl, "{tensor_parallel: 1, data_parallel: 8, expert_parallel: true, instances: 1}", "{engine: none}"), "q.yaml");
  EXPECT_EQ(serve(plain).dump(), serve(spelled).dump());
}

// EPLB in serving as the engines run it (SGLang --ep-num-redundant-experts, issue 26): the
// redundant slots' weights come out of every GPU's KV cache, and a re-placement every n steps
// moves expert weights between GPUs as timed peer copies.
TEST(Deployments, EplbSlotsTakeKvCacheAndRebalancingMovesWeights) {
  const std::string wl =
      "{kind: serving, requests: 16, arrival: {process: closed, clients: 16}, prompt_tokens: 128, output_tokens: 12, "
      "routing: {kind: zipf, s: 1.2}}";
  const auto blocks = [](const nlohmann::json& m) { return m["pools"][0]["kv_blocks_per_rank"][0].get<std::int64_t>(); };
  const nlohmann::json plain = serve(load_scenario_text(scenario(wl, "{}", "{}", "static-ep"), "a.yaml"));
  const nlohmann::json slots = serve(load_scenario_text(scenario(wl, "{}", "{}", "{name: eplb, redundant_experts: 8}"), "b.yaml"));
  const nlohmann::json moving =
      serve(load_scenario_text(scenario(wl, "{}", "{}", "{name: eplb, redundant_experts: 8, rebalance_every: 2}"), "c.yaml"));
  // Mixtral's 2 layers: one extra expert per GPU in each, 2 x 352 MB of bf16 weights.
  const double expert = model_presets().get("mixtral-8x7b").value.expert_bytes();
  const double block = 16.0 * kv_cache_bytes_per_token_gpu(model_presets().get("mixtral-8x7b").value, 1) * 2.0 / 32.0;
  EXPECT_NEAR(static_cast<double>(blocks(plain) - blocks(slots)), 2.0 * expert / block, 1.0);
  EXPECT_EQ(blocks(slots), blocks(moving));
  EXPECT_EQ(plain["bytes"]["intra_node"].get<double>() > 0.0, true);
  EXPECT_GT(moving["bytes"]["intra_node"].get<double>(), slots["bytes"]["intra_node"].get<double>());
}

}  // namespace moesim
