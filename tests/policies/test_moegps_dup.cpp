// moegps-dup (MoE-GPS Algorithm 1, §3.1): the algorithm on its own (balance, C_max, memory,
// conservation, copy sources, the open points), the policy's plan (copies as timed peer fetches,
// none when balanced, memory accounting, static-ep without a forecast) and scenario-shaped plans
// against static-ep, across forecast kinds and errors (§3.2–3.3).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <tuple>

#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "models/model_spec.hpp"
#include "models/routing.hpp"
#include "serving/batch_planner.hpp"
#include "policies/memory.hpp"
#include "policies/moegps_dup.hpp"
#include "tests/support/policy_fixtures.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

using testing_support::expert_busy;
using testing_support::fixed_routing;
using testing_support::make_policy;
using testing_support::phase_bytes;
using testing_support::worst_max_over_mean;

constexpr double kPlenty = 1e18;  // memory that never binds
constexpr double kEb = 100.0;     // params(e) in the algorithm tests

std::vector<std::vector<int>> hosts_of(const std::vector<int>& owner) {
  return ExpertPlacement::from_owner(owner, *std::max_element(owner.begin(), owner.end()) + 1).gpus_of_expert;
}

// Items of `counts`, interleaved by a fixed permutation so that experts' tokens are mixed.
std::vector<std::int32_t> mixed_items(const std::vector<std::int64_t>& counts) {
  return testing_support::mixed_routing(counts, 42).experts;
}

const std::vector<std::vector<std::int64_t>> kSkews{
    {64, 10, 9, 9, 9, 9, 9, 9}, {200, 1, 1, 1, 1, 1, 1, 1}, {40, 30, 20, 10, 8, 8, 8, 4}, {0, 0, 0, 0, 0, 0, 5, 90}};

std::int64_t spread(const std::vector<std::int64_t>& load) {
  return *std::max_element(load.begin(), load.end()) - *std::min_element(load.begin(), load.end());
}

// Every item runs on a GPU hosting its expert; loads recount; copies are exactly P_after \ P_before,
// each from an initial host to a GPU that lacked the expert.
void check_consistent(const Duplication& d, const std::vector<std::int32_t>& items,
                      const std::vector<std::vector<int>>& before, int G) {
  std::vector<std::int64_t> load(G, 0);
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& h = d.gpus_of_expert[items[i]];
    EXPECT_NE(std::find(h.begin(), h.end(), d.gpu_of_item[i]), h.end()) << "item " << i;
    ++load[d.gpu_of_item[i]];
  }
  EXPECT_EQ(load, d.gpu_load);
  const auto added = new_hosts(before, d.gpus_of_expert);
  ASSERT_EQ(added.size(), d.copies.size());
  for (const WeightCopy& c : d.copies) {
    EXPECT_NE(std::find(before[c.expert].begin(), before[c.expert].end(), c.src_endpoint), before[c.expert].end());
    EXPECT_EQ(std::find(before[c.expert].begin(), before[c.expert].end(), c.dst_gpu), before[c.expert].end());
    EXPECT_NE(std::find(added.begin(), added.end(), std::make_pair(c.expert, c.dst_gpu)), added.end());
  }
}

}  // namespace

TEST(MoeGpsAlgorithm, MovesTheFirstDeltaTokensOfTheHeaviestExpert) {
  // L = [7, 2]: Δ = ceil(5 / 2) = 3, e* = 0 is copied to GPU 1 and its first three tokens
  // follow; then L = [4, 5] differs by one and the loop ends.
  const Duplication d = duplicate_experts({0, 0, 0, 0, 0, 0, 0, 1, 1}, {{0}, {1}}, {kPlenty, kPlenty}, kEb, 2);
  EXPECT_EQ(d.gpu_of_item, (std::vector<int>{1, 1, 1, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(d.gpu_load, (std::vector<std::int64_t>{4, 5}));
  ASSERT_EQ(d.copies.size(), 1u);
  EXPECT_EQ(d.copies[0].expert, 0);
  EXPECT_EQ(d.copies[0].src_endpoint, 0);
  EXPECT_EQ(d.copies[0].dst_gpu, 1);
}

TEST(MoeGpsAlgorithm, EndsBalancedWithinOneTokenWhenMemoryAndCopiesAllow) {
  for (const char* layout : {"contiguous", "round-robin"})
    for (const auto& counts : kSkews) {
      const auto items = mixed_items(counts);
      const auto before = hosts_of(static_owner(layout, 8, 4));
      const Duplication d = duplicate_experts(items, before, std::vector<double>(4, kPlenty), kEb, 4);
      EXPECT_LE(spread(d.gpu_load), 1) << layout << " " << counts[0];
      check_consistent(d, items, before, 4);
    }
}

TEST(MoeGpsAlgorithm, HonoursMaxCopies) {
  for (const auto& counts : kSkews) {
    const auto items = mixed_items(counts);
    const auto before = hosts_of(static_owner("contiguous", 8, 4));
    const Duplication two = duplicate_experts(items, before, std::vector<double>(4, kPlenty), kEb, 2);
    for (const auto& h : two.gpus_of_expert) EXPECT_LE(h.size(), 2u);
    check_consistent(two, items, before, 4);
    // C_max = 1: the static layout stays, every item on its owner.
    const Duplication one = duplicate_experts(items, before, std::vector<double>(4, kPlenty), kEb, 1);
    EXPECT_TRUE(one.copies.empty());
    for (std::size_t i = 0; i < items.size(); ++i) EXPECT_EQ(one.gpu_of_item[i], before[items[i]][0]);
  }
}

TEST(MoeGpsAlgorithm, HonoursMemory) {
  const auto items = mixed_items(kSkews[0]);
  const auto before = hosts_of(static_owner("contiguous", 8, 4));
  // M_g below params(e): no copy anywhere; the loop ends unbalanced.
  const Duplication none = duplicate_experts(items, before, std::vector<double>(4, 0.5 * kEb), kEb, 4);
  EXPECT_TRUE(none.copies.empty());
  EXPECT_GT(spread(none.gpu_load), 1);
  check_consistent(none, items, before, 4);
  // Room for one copy on GPU 2 only: at most that copy is made.
  const Duplication one = duplicate_experts(items, before, {0.0, 0.0, 1.5 * kEb, 0.0}, kEb, 4);
  ASSERT_LE(one.copies.size(), 1u);
  for (const WeightCopy& c : one.copies) EXPECT_EQ(c.dst_gpu, 2);
  check_consistent(one, items, before, 4);
}

TEST(MoeGpsAlgorithm, TriesTheNextExpertAndCapsDeltaWhenTheHeaviestCannotMove) {
  // Expert 0 (10 tokens, GPU 0 only) may not be copied (C_max = 1); expert 1 is also hosted on
  // GPU 1, so its 4 tokens move although Δ = 7, and then nothing can move: the loop stops.
  const std::vector<std::int32_t> items{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
  const Duplication d = duplicate_experts(items, {{0}, {0, 1}}, {kPlenty, kPlenty}, kEb, 1);
  EXPECT_TRUE(d.copies.empty());
  EXPECT_EQ(d.gpu_load, (std::vector<std::int64_t>{10, 4}));
  for (std::size_t i = 10; i < items.size(); ++i) EXPECT_EQ(d.gpu_of_item[i], 1);
}

TEST(MoeGpsAlgorithm, CopySourcesPreferKeepersThenSpread) {
  // Expert 0 moves from {0, 1} to {1, 2}: GPU 1 keeps it, so it sends. Expert 1 gains GPUs 2 and
  // 3 from {0, 1}: the second copy goes to the less busy sender.
  const auto copies = weight_copies({{0, 2}, {1, 2}, {1, 3}}, {{0, 1}, {0, 1}}, {{1, 2}, {0, 1, 2, 3}});
  ASSERT_EQ(copies.size(), 3u);
  EXPECT_EQ(copies[0].src_endpoint, 1);
  EXPECT_EQ(copies[1].src_endpoint, 0);
  EXPECT_EQ(copies[2].src_endpoint, 0);  // GPUs 0 and 1 have each sent one: lowest index
  EXPECT_EQ(new_hosts({{0, 1}, {0, 1}}, {{1, 2}, {0, 1, 2, 3}}),
            (std::vector<std::pair<int, int>>{{0, 2}, {1, 2}, {1, 3}}));
}

// The policy's plans. A test that means the oracle — Algorithm 1 on the true routing, as
// moegps-dup behaved before predictors — passes an oracle forecast (kTokens, every selection
// right, ε = 0); without a forecast the policy is static-ep.
class MoeGpsPlan : public ::testing::Test {
 protected:
  ModelSpec model = model_presets().get("switch-base-8").value;
  Cluster cluster{testing_support::full_mesh(1, 4)};
  PrefillWorkload wl{8, 16, 1};  // 128 tokens
  PolicyContext ctx{model, cluster, wl};

  std::unique_ptr<Policy> make(int max_copies = -1) {
    YAML::Node opts;
    opts["max_copies"] = max_copies;
    auto p = make_policy("moegps-dup", opts);
    p->setup(ctx);
    return p;
  }
  BatchPlan plan(Policy& p, const std::vector<std::int64_t>& counts, const PolicyContext* c = nullptr) {
    const LayerRouting r = fixed_routing(counts);
    return testing_support::plan_forecast(p, c ? *c : ctx, r, testing_support::oracle_forecast(r));
  }
  static std::vector<const Task*> fetches(const BatchPlan& bp) {
    std::vector<const Task*> out;
    for (const Task& t : bp.graph.tasks())
      if (t.kind == TaskKind::kTransfer && t.phase == phase::kFetch) out.push_back(&t);
    return out;
  }
};

TEST_F(MoeGpsPlan, CopiesAreTimedPeerFetchesOfExpertBytes) {
  auto p = make();
  const BatchPlan bp = plan(*p, kSkews[0]);
  const auto f = fetches(bp);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f.size() % static_cast<std::size_t>(model.num_moe_layers()), 0u);  // same routing each layer
  for (const Task* t : f) {
    EXPECT_DOUBLE_EQ(t->bytes, model.expert_bytes());
    EXPECT_EQ(t->engine, CopyEngine::kPeer);
    EXPECT_NE(t->src, t->dst);
  }
  for (const auto& moe : bp.moe) {
    EXPECT_LE(spread(moe.gpu_tokens), 1);
    EXPECT_EQ(std::accumulate(moe.gpu_tokens.begin(), moe.gpu_tokens.end(), std::int64_t{0}), 128);
  }
  // Memory: static experts plus every layer's kept replicas (MoE-GPS §5, `keep_copies`).
  std::vector<int> per_gpu(4, 0);
  for (const Task* t : f) ++per_gpu[t->dst];
  const auto bytes = p->expert_memory_bytes(ctx);
  for (int g = 0; g < 4; ++g)
    EXPECT_DOUBLE_EQ(bytes[g], (2.0 * model.num_moe_layers() + per_gpu[g]) * model.expert_bytes()) << g;

  // Without keeping, one layer's copies reuse buffers: static plus the largest one-layer buffer.
  YAML::Node opts;
  opts["keep_copies"] = false;
  auto reuse = make_policy("moegps-dup", opts);
  reuse->setup(ctx);
  const BatchPlan reuse_plan = plan(*reuse, kSkews[0]);
  const auto g2 = fetches(reuse_plan);
  std::vector<int> one_layer(4, 0);
  for (const Task* t : g2)
    if (t->layer == g2.front()->layer) ++one_layer[t->dst];
  const auto reuse_bytes = reuse->expert_memory_bytes(ctx);
  for (int g = 0; g < 4; ++g)
    EXPECT_DOUBLE_EQ(reuse_bytes[g], (2.0 * model.num_moe_layers() + one_layer[g]) * model.expert_bytes()) << g;
}

// `copies: hidden` (MoE-GPS §5's assumption): the same placement and dispatch, the same replica
// memory, and no copy on the network.
TEST_F(MoeGpsPlan, HiddenCopiesMoveNothingButPlaceAndAccountTheSame) {
  auto timed = make();
  YAML::Node opts;
  opts["copies"] = "hidden";
  auto hidden = make_policy("moegps-dup", opts);
  hidden->setup(ctx);
  const BatchPlan t = plan(*timed, kSkews[0]);
  const BatchPlan h = plan(*hidden, kSkews[0]);
  ASSERT_FALSE(fetches(t).empty());
  EXPECT_TRUE(fetches(h).empty());
  ASSERT_EQ(t.moe.size(), h.moe.size());
  for (std::size_t i = 0; i < t.moe.size(); ++i) EXPECT_EQ(t.moe[i].gpu_tokens, h.moe[i].gpu_tokens) << i;
  EXPECT_EQ(timed->expert_memory_bytes(ctx), hidden->expert_memory_bytes(ctx));
}

// A steady distribution forecast keeps needing the same replicas, even when a batch's true
// selections leave one of them idle: they stay, and later batches copy nothing.
TEST_F(MoeGpsPlan, SteadyForecastKeepsItsReplicasWhateverTheBatchRouted) {
  auto keep = make();
  const std::vector<double> share{0.5, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05};
  const LayerRouting first = fixed_routing({64, 13, 13, 13, 6, 6, 7, 6});
  const BatchPlan a = testing_support::plan_forecast(*keep, ctx, first, testing_support::distribution_forecast(first, share));
  EXPECT_FALSE(fetches(a).empty());
  // Fewer tokens on the hot expert than planned: its owner's slots absorb them all.
  for (const auto& counts : {std::vector<std::int64_t>{40, 20, 20, 16, 8, 8, 8, 8},
                             std::vector<std::int64_t>{70, 10, 12, 12, 6, 6, 6, 6}}) {
    const LayerRouting r = fixed_routing(counts);
    const BatchPlan b = testing_support::plan_forecast(*keep, ctx, r, testing_support::distribution_forecast(r, share));
    EXPECT_TRUE(fetches(b).empty());
  }
}

// MoE-GPS §5: expert weights are static across inputs. With the same skew in the next batch, the
// kept replicas serve it without a copy; without keeping, every batch copies again.
TEST_F(MoeGpsPlan, KeptReplicasServeTheNextBatchWithoutCopies) {
  auto keep = make();
  EXPECT_FALSE(fetches(plan(*keep, kSkews[0])).empty());
  const BatchPlan second = plan(*keep, kSkews[0]);
  EXPECT_TRUE(fetches(second).empty());
  for (const auto& moe : second.moe) EXPECT_LE(spread(moe.gpu_tokens), 1);  // still balanced

  YAML::Node opts;
  opts["keep_copies"] = false;
  auto reuse = make_policy("moegps-dup", opts);
  reuse->setup(ctx);
  EXPECT_FALSE(fetches(plan(*reuse, kSkews[0])).empty());
  EXPECT_FALSE(fetches(plan(*reuse, kSkews[0])).empty());
}

TEST_F(MoeGpsPlan, OracleTokensSkipTheScatterAndGatherHome) {
  auto p = make();
  const BatchPlan bp = plan(*p, kSkews[0]);
  EXPECT_EQ(phase_bytes(bp.graph, phase::kDispatch), 0.0);  // §3.2.2: placed on its GPU before attention
  EXPECT_GT(phase_bytes(bp.graph, phase::kCombine), 0.0);
}

TEST_F(MoeGpsPlan, WithoutAForecastItPlansStaticEp) {
  // MoE-GPS §4's "no prediction": nothing is known before routing, so nothing is copied ahead.
  auto dup = make();
  auto st = make_policy("static-ep", YAML::Node(YAML::NodeType::Map));
  st->setup(ctx);
  const std::vector<LayerRouting> layers(model.num_moe_layers(), fixed_routing(kSkews[0]));
  const BatchPlan a = plan_batch(*dup, ctx, 0, layers), b = plan_batch(*st, ctx, 0, layers);
  EXPECT_TRUE(fetches(a).empty());
  EXPECT_EQ(a.graph.size(), b.graph.size());
  ASSERT_EQ(a.moe.size(), b.moe.size());
  for (std::size_t i = 0; i < a.moe.size(); ++i) EXPECT_EQ(a.moe[i].gpu_tokens, b.moe[i].gpu_tokens);
  for (int l = 0; l < model.layers; ++l)
    for (const Phase ph : {phase::kDispatch, phase::kCombine})
      EXPECT_EQ(testing_support::bytes_into(a.graph, cluster, ph, l), testing_support::bytes_into(b.graph, cluster, ph, l));
}

TEST_F(MoeGpsPlan, NoCopiesWhenAlreadyBalanced) {
  auto p = make();
  const BatchPlan bp = plan(*p, std::vector<std::int64_t>(8, 16));
  EXPECT_TRUE(fetches(bp).empty());
  for (const auto& moe : bp.moe) EXPECT_EQ(moe.gpu_tokens, (std::vector<std::int64_t>(4, 32)));
}

TEST_F(MoeGpsPlan, MaxCopiesOneIsStaticEp) {
  auto p = make(1);
  const BatchPlan bp = plan(*p, kSkews[0]);
  EXPECT_TRUE(fetches(bp).empty());
  for (const auto& moe : bp.moe) EXPECT_EQ(moe.gpu_tokens, (std::vector<std::int64_t>{74, 18, 18, 18}));
}

TEST_F(MoeGpsPlan, NoCopiesWithoutHeadroom) {
  // A GPU whose memory leaves less than one expert once the static layout is in place.
  const auto free = memory_headroom(*make(), ctx);
  ClusterSpec spec = testing_support::full_mesh(1, 4);
  spec.gpu.memory_bytes -= *std::min_element(free.begin(), free.end()) - 0.5 * model.expert_bytes();
  const Cluster tight(spec);
  const PolicyContext tctx{model, tight, wl};
  auto p = make_policy("moegps-dup", YAML::Node(YAML::NodeType::Map));
  p->setup(tctx);
  const BatchPlan bp = plan(*p, kSkews[0], &tctx);
  EXPECT_TRUE(fetches(bp).empty());
  for (const auto& moe : bp.moe) EXPECT_EQ(moe.gpu_tokens[0], 74);
}

namespace {

const char* kSwitch = R"(name: dup
seed: 3
model: {preset: switch-base-128, layers: 4}
hardware: dgx1-v100
workload: {batch_size: 64, seq_len: 512, batches: 2, routing: {kind: skewed, alpha: 0.9}}
policy: [static-ep, moegps-dup]
)";

const char* kMixtral = R"(name: dup
seed: 3
model: {preset: mixtral-8x7b, layers: 2}
hardware: hgx-a100-4gpu-nvlink
workload: {batch_size: 1, seq_len: 512, batches: 2, routing: {kind: skewness, skewness: 2.0}}
policy: [static-ep, moegps-dup]
)";

using ForecastOf = std::function<Forecast(const LayerRouting&)>;
const ForecastOf kNoForecast = [](const LayerRouting&) { return Forecast{}; };
const ForecastOf kOracle = [](const LayerRouting& r) { return testing_support::oracle_forecast(r); };

// Batch 0 of a scenario's routing, planned under `policy` with `forecast` of each MoE layer (made
// by hand: an exact ε, a stated error model) and run on the engine, every task's timing kept.
struct Planned { BatchPlan plan; std::vector<TaskTiming> timing; };
Planned plan_scenario(const char* text, const char* policy, const ForecastOf& forecast,
                      const std::vector<std::string>& overrides = {}) {
  const Scenario s = load_scenario_text(text, "dup.yaml", overrides);
  const Cluster cluster(s.hardware);
  const PolicyContext ctx{s.model, cluster, s.workload};
  auto p = make_policy(policy, YAML::Node(YAML::NodeType::Map));
  p->setup(ctx);
  const auto routing = routing_models().get(s.routing.kind).value.make(s.routing.params, routing_context(s), s.routing.where);
  std::vector<LayerRouting> layers;
  std::vector<Forecast> forecasts;
  for (int l = 0; l < s.model.num_moe_layers(); ++l) {
    Rng rng = Rng::derive(s.seed, Stream::kBatchRouting, 0, static_cast<std::uint64_t>(l));
    layers.push_back(routing->route(0, l, s.workload.tokens_per_batch(), rng));
    forecasts.push_back(forecast(layers.back()));
  }
  Planned out{plan_batch(*p, ctx, 0, layers, &forecasts), {}};
  out.timing = testing_support::execute_plan(out.plan.graph, cluster);
  return out;
}

// Runs × predictors through run_scenario: static-ep and moegps-dup, each with no prediction and
// with the oracle predictor (this batch's true selections before attention, ε = 0).
nlohmann::json run_with_predictors(const char* text) {
  return run_scenario(load_scenario_text(std::string(text) + "predictor: [none, oracle]\n", "dup.yaml"));
}
double metric(const nlohmann::json& r, int run, const char* path) {
  return r["runs"][run]["metrics"][nlohmann::json::json_pointer(path)].get<double>();
}
enum Run { kStaticNone, kStaticOracle, kDupNone, kDupOracle };

}  // namespace

TEST(MoeGpsScenario, OracleBalancesSwitchUnderSkewAndBeatsStaticEp) {
  const auto r = run_with_predictors(kSwitch);
  ASSERT_EQ(r["runs"][kDupOracle]["predictor"], "oracle");
  EXPECT_GT(metric(r, kStaticNone, "/load/gpu_max_over_mean"), 2.0);
  EXPECT_LT(metric(r, kDupOracle, "/load/gpu_max_over_mean"), 1.01);
  EXPECT_LT(metric(r, kDupOracle, "/layer_latency_ms/mean"), metric(r, kStaticNone, "/layer_latency_ms/mean"));
  // No prediction: duplication cannot act ahead of routing, and moegps-dup is static-ep.
  EXPECT_EQ(r["runs"][kDupNone]["metrics"]["layer_latency_ms"], r["runs"][kStaticNone]["metrics"]["layer_latency_ms"]);
  EXPECT_EQ(r["runs"][kDupNone]["metrics"]["load"], r["runs"][kStaticNone]["metrics"]["load"]);
}

// Mixtral batch 1 x 512: Algorithm 1 balances, but each copy is a 352 MB expert over a 100 GB/s
// pair link, far longer than the 512-token attention it starts beside (MoE-GPS §5 estimated
// ~0.1 ms at 2 TB/s). The engine times it, so duplication does not pay here.
TEST(MoeGpsScenario, MixtralOracleCopiesAreTimedNotFree) {
  const auto r = run_with_predictors(kMixtral);
  EXPECT_LT(metric(r, kDupOracle, "/load/gpu_max_over_mean"), 1.01);
  EXPECT_GT(metric(r, kDupOracle, "/layer_latency_ms/mean"), metric(r, kStaticNone, "/layer_latency_ms/mean"));
}

// Copies start at the layer start and overlap attention; the share of copy time that does is
// larger on NVLink than on PCIe (same attention, slower copies).
TEST(MoeGpsScenario, CopiesOverlapAttentionMoreOnNvlinkThanPcie) {
  auto hidden_share = [](const char* hardware) {
    const Planned p = plan_scenario(kMixtral, "moegps-dup", kOracle, {std::string("hardware=") + hardware});
    const TaskGraph& g = p.plan.graph;
    std::vector<Tick> attn_begin(g.size(), kTickMax), attn_end(g.size(), 0);  // by layer
    for (TaskId id = 0; id < g.size(); ++id)
      if (g.task(id).phase == phase::kAttention) {
        const int l = g.task(id).layer;
        attn_begin[l] = std::min(attn_begin[l], p.timing[id].start);
        attn_end[l] = std::max(attn_end[l], p.timing[id].end);
      }
    double copy = 0.0, overlap = 0.0;
    for (TaskId id = 0; id < g.size(); ++id) {
      const Task& t = g.task(id);
      if (t.kind != TaskKind::kTransfer || t.phase != phase::kFetch) continue;
      copy += static_cast<double>(p.timing[id].end - p.timing[id].start);
      overlap += static_cast<double>(std::max<Tick>(
          0, std::min(p.timing[id].end, attn_end[t.layer]) - std::max(p.timing[id].start, attn_begin[t.layer])));
    }
    EXPECT_GT(copy, 0.0) << hardware;
    return overlap / copy;
  };
  const double nvlink = hidden_share("hgx-a100-4gpu-nvlink"), pcie = hidden_share("a100-4gpu-pcie");
  EXPECT_GT(pcie, 0.0);
  EXPECT_GT(nvlink, pcie);
}

// Mixtral-shaped plans across token-to-expert accuracy (MoE-GPS §3.3, §4), the ingredients of
// Fig. 6's U-shape that the policy owns (the predictor's overhead is the other arm): as ε falls,
// compute imbalance, the busiest GPU's expert time and forwarded bytes fall; at ε = 0 the expert
// phase is balanced and nothing scatters. Batch 16 x 512 keeps the expert GEMMs compute-bound as
// the paper's model assumes (at batch 1 weight reads bound them: more copied experts, more time).
TEST(MoeGpsMixtral, ImbalanceAndScatterFallAsTokenErrorFalls) {
  const std::vector<std::string> batch16{"workload.batch_size=16"};
  double prev_imbalance = worst_max_over_mean(plan_scenario(kMixtral, "static-ep", kNoForecast, batch16).plan);
  double prev_scatter = 0.0, prev_busiest = 0.0;
  for (const double eps : {0.4, 0.2, 0.1, 0.0}) {
    const auto forecast = [eps](const LayerRouting& r) { return testing_support::mispredicting_forecast(r, eps); };
    const Planned p = plan_scenario(kMixtral, "moegps-dup", forecast, batch16);
    const double imbalance = worst_max_over_mean(p.plan), scatter = phase_bytes(p.plan.graph, phase::kDispatch);
    const auto busy = expert_busy(p.plan.graph, p.timing, 4);
    const double busiest = *std::max_element(busy.begin(), busy.end());
    EXPECT_LT(imbalance, prev_imbalance) << eps;
    if (eps < 0.4) {
      EXPECT_LT(scatter, prev_scatter) << eps;
    }
    // The busiest GPU's expert time follows its tokens while they differ by 10% or more; from
    // ε = 0.1 to exact balance its time is set as much by the shapes of its expert GEMMs (the
    // copies it received), so it stays within 1% (0.5% above with seed 3's draws).
    if (eps >= 0.1 && eps < 0.4) {
      EXPECT_LT(busiest, prev_busiest) << eps;
    }
    if (eps == 0.0) {
      EXPECT_LT(busiest, 1.01 * prev_busiest);
    }
    EXPECT_GT(phase_bytes(p.plan.graph, phase::kCombine), 0.0);  // outputs always return home
    if (eps == 0.0) {
      EXPECT_LT(imbalance, 1.01);
      EXPECT_EQ(scatter, 0.0);
      EXPECT_LT(busiest / *std::min_element(busy.begin(), busy.end()), 1.05);
    }
    std::tie(prev_imbalance, prev_scatter, prev_busiest) = std::tie(imbalance, scatter, busiest);
  }
}

// Distribution-only (MoE-GPS §3.2.1): exact shares balance compute like the oracle, but the
// selections still scatter from their homes.
TEST(MoeGpsMixtral, ExactSharesBalanceComputeButStillScatter) {
  const Planned p = plan_scenario(kMixtral, "moegps-dup", [](const LayerRouting& r) {
    return testing_support::distribution_forecast(r, expert_shares(r));
  });
  EXPECT_LT(worst_max_over_mean(p.plan), 1.01);
  const double scatter = phase_bytes(plan_scenario(kMixtral, "static-ep", kNoForecast).plan.graph, phase::kDispatch);
  EXPECT_GT(phase_bytes(p.plan.graph, phase::kDispatch), 0.5 * scatter);
}

}  // namespace moesim
