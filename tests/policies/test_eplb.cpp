// eplb (DeepSeek EPLB, public): replica counts, slot counts per GPU, token conservation, the
// balance it buys over static-ep under skew, static-versus-periodic placement, and the
// (E + R) % G input check, and the weight copies a re-placement costs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include <nlohmann/json.hpp>

#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "models/model_spec.hpp"
#include "serving/batch_planner.hpp"
#include "policies/eplb.hpp"
#include "policies/expert_parallel.hpp"
#include "policies/expert_copies.hpp"
#include "tests/support/policy_fixtures.hpp"
#include "hardware/phase.hpp"

namespace moesim {

namespace {

using testing_support::fixed_routing;
using testing_support::make_policy;

ClusterSpec mesh(int nodes, int gpus_per_node) { return testing_support::full_mesh(nodes, gpus_per_node); }

std::unique_ptr<Policy> make_eplb(int redundant, const std::string& packing = "global", int rebalance = 0) {
  YAML::Node opts;
  opts["redundant_experts"] = redundant;
  opts["packing"] = packing;
  opts["rebalance_every"] = rebalance;
  return make_policy("eplb", opts);
}

double max_over_mean(const std::vector<std::int64_t>& v) {
  const double sum = static_cast<double>(std::accumulate(v.begin(), v.end(), std::int64_t{0}));
  return static_cast<double>(*std::max_element(v.begin(), v.end())) / (sum / static_cast<double>(v.size()));
}

// Checks the invariants of a placement: E + R replicas, (E + R) / G per GPU, every expert placed.
void check_slots(const std::vector<std::vector<int>>& reps, int E, int R, int G) {
  ASSERT_EQ(reps.size(), static_cast<std::size_t>(E));
  std::vector<int> per_gpu(G, 0);
  int total = 0;
  for (const auto& r : reps) {
    EXPECT_GE(r.size(), 1u);
    total += static_cast<int>(r.size());
    for (const int g : r) ++per_gpu[g];
  }
  EXPECT_EQ(total, E + R);
  for (int g = 0; g < G; ++g) EXPECT_EQ(per_gpu[g], (E + R) / G) << "gpu " << g;
}

}  // namespace

TEST(EplbPlacement, ReplicasHonourCounts) {
  // Expert 0 carries half the load: 64 → 32 → 21.3 → 16 → 12.8 is still the highest per replica.
  const std::vector<double> load{64, 10, 9, 9, 9, 9, 9, 9};
  const auto reps = eplb_place(load, 4, 4, 1, false);
  check_slots(reps, 8, 4, 4);
  EXPECT_EQ(reps[0].size(), 5u);
  for (int e = 1; e < 8; ++e) EXPECT_EQ(reps[e].size(), 1u);
}

TEST(EplbPlacement, HottestGetsMostAndReplicasSpread) {
  const std::vector<double> load{5, 40, 3, 20, 2, 2, 4, 4, 1, 1, 6, 12, 3, 3, 2, 2};
  const int E = 16, R = 8, G = 8;
  const auto reps = eplb_place(load, R, G, 1, false);
  check_slots(reps, E, R, G);
  for (int e = 0; e < E; ++e) {
    EXPECT_LE(reps[e].size(), reps[1].size());
    // No expert has more replicas than GPUs here, so no GPU holds two copies of one expert.
    EXPECT_EQ(std::set<int>(reps[e].begin(), reps[e].end()).size(), reps[e].size()) << "expert " << e;
  }
  EXPECT_GT(reps[1].size(), reps[3].size());
  EXPECT_GE(reps[3].size(), reps[11].size());
}

TEST(EplbPlacement, HierarchicalKeepsReplicasInTheirNode) {
  const std::vector<double> load{5, 40, 3, 20, 2, 2, 4, 4, 1, 1, 6, 12, 3, 3, 2, 2};
  const int E = 16, R = 8, G = 8, N = 2;
  const auto reps = eplb_place(load, R, G, N, true);
  check_slots(reps, E, R, G);
  for (int e = 0; e < E; ++e) {
    std::set<int> nodes;
    for (const int g : reps[e]) nodes.insert(g / (G / N));
    EXPECT_EQ(nodes.size(), 1u) << "expert " << e << " spans nodes";
  }
  // Each node holds E / N experts and R / N redundant replicas.
  std::vector<int> experts_per_node(N, 0);
  for (int e = 0; e < E; ++e) ++experts_per_node[reps[e][0] / (G / N)];
  EXPECT_EQ(experts_per_node, (std::vector<int>{8, 8}));
  // With one node, hierarchical equals global.
  EXPECT_EQ(eplb_place(load, R, G, 1, true), eplb_place(load, R, G, 1, false));
}

class EplbPlan : public ::testing::Test {
 protected:
  ModelSpec model = model_presets().get("switch-base-8").value;
  Cluster cluster{mesh(1, 4)};
  PrefillWorkload wl{8, 16, 1};  // 128 tokens
  PolicyContext ctx{model, cluster, wl};

  std::vector<LayerRouting> same_every_layer(const std::vector<std::int64_t>& counts) const {
    return std::vector<LayerRouting>(model.num_moe_layers(), fixed_routing(counts));
  }
};

TEST_F(EplbPlan, TokenConservation) {
  auto policy = make_eplb(4);
  policy->setup(ctx);
  const BatchPlan bp = plan_batch(*policy, ctx, 0, same_every_layer({40, 30, 20, 10, 8, 8, 8, 4}));
  ASSERT_EQ(bp.moe.size(), static_cast<std::size_t>(model.num_moe_layers()));
  for (const auto& moe : bp.moe) {
    EXPECT_EQ(moe.tokens_dropped, 0);
    EXPECT_EQ(std::accumulate(moe.gpu_tokens.begin(), moe.gpu_tokens.end(), std::int64_t{0}), 128);
  }
  // (E + R) / G = 3 expert copies per GPU per MoE layer.
  for (const double b : policy->expert_memory_bytes(ctx))
    EXPECT_DOUBLE_EQ(b, 3.0 * model.expert_bytes() * model.num_moe_layers());
}

TEST_F(EplbPlan, BalancesSkewBetterThanStaticEp) {
  // Expert 0 takes 50% of the selections.
  const auto routing = same_every_layer({64, 10, 9, 9, 9, 9, 9, 9});
  YAML::Node opts;
  opts["placement"] = "contiguous";
  auto stat = make_policy("static-ep", opts);
  stat->setup(ctx);
  auto eplb = make_policy("eplb", YAML::Node(YAML::NodeType::Map));  // defaults: R = G = 4
  eplb->setup(ctx);
  const BatchPlan s = plan_batch(*stat, ctx, 0, routing);
  const BatchPlan e = plan_batch(*eplb, ctx, 0, routing);
  for (std::size_t l = 0; l < s.moe.size(); ++l) {
    const double rs = max_over_mean(s.moe[l].gpu_tokens), re = max_over_mean(e.moe[l].gpu_tokens);
    EXPECT_NEAR(rs, 74.0 / 32.0, 1e-9);
    EXPECT_LT(re, 1.15);
    EXPECT_LT(re, 0.55 * rs);
  }
}

TEST_F(EplbPlan, StaticUnlessRebalanced) {
  const auto first = same_every_layer({64, 10, 9, 9, 9, 9, 9, 9});
  const auto second = same_every_layer({9, 9, 9, 9, 9, 9, 10, 64});
  auto kept = make_eplb(4, "global", 0);
  auto periodic = make_eplb(4, "global", 1);
  kept->setup(ctx);
  periodic->setup(ctx);
  plan_batch(*kept, ctx, 0, first);
  plan_batch(*periodic, ctx, 0, first);
  const BatchPlan k = plan_batch(*kept, ctx, 1, second);
  const BatchPlan p = plan_batch(*periodic, ctx, 1, second);
  for (std::size_t l = 0; l < k.moe.size(); ++l) {
    // The kept placement has one copy of expert 7: its GPU computes all 64 selections.
    EXPECT_GE(*std::max_element(k.moe[l].gpu_tokens.begin(), k.moe[l].gpu_tokens.end()), 64);
    EXPECT_LT(max_over_mean(p.moe[l].gpu_tokens), 1.15);
    EXPECT_EQ(std::accumulate(k.moe[l].gpu_tokens.begin(), k.moe[l].gpu_tokens.end(), std::int64_t{0}), 128);
  }
}

// The (src, dst) of every peer weight copy in layer `layer` of a plan.
std::multiset<std::pair<int, int>> copies_in(const BatchPlan& bp, int layer, double expert_bytes) {
  std::multiset<std::pair<int, int>> out;
  for (const Task& t : bp.graph.tasks()) {
    if (t.kind != TaskKind::kTransfer || t.phase != phase::kFetch) continue;
    EXPECT_DOUBLE_EQ(t.bytes, expert_bytes);
    EXPECT_EQ(t.engine, CopyEngine::kPeer);
    if (t.layer == layer) out.emplace(t.src, t.dst);
  }
  return out;
}

TEST_F(EplbPlan, RePlacementCopiesNewReplicasFromFormerHolders) {
  const std::vector<std::int64_t> a{64, 10, 9, 9, 9, 9, 9, 9}, b{9, 9, 9, 9, 9, 9, 10, 64};
  auto periodic = make_eplb(4, "global", 1);
  auto kept = make_eplb(4, "global", 0);
  periodic->setup(ctx);
  kept->setup(ctx);
  const int layer = model.first_dense_layers + model.moe_offset;  // first MoE layer
  // The first placement is the model's initial load: not timed.
  EXPECT_TRUE(copies_in(plan_batch(*periodic, ctx, 0, same_every_layer(a)), layer, model.expert_bytes()).empty());
  plan_batch(*kept, ctx, 0, same_every_layer(a));
  // Re-placing for b: one copy per replica on a GPU that lacked its expert, from a former holder.
  const auto before = eplb_place({a.begin(), a.end()}, 4, 4, 1, false);
  const auto after = eplb_place({b.begin(), b.end()}, 4, 4, 1, false);
  const auto added = new_hosts(before, after);
  ASSERT_FALSE(added.empty());
  std::multiset<std::pair<int, int>> want;
  for (const WeightCopy& c : weight_copies(added, before, after)) {
    EXPECT_NE(std::find(before[c.expert].begin(), before[c.expert].end(), c.src_endpoint), before[c.expert].end());
    EXPECT_EQ(std::find(before[c.expert].begin(), before[c.expert].end(), c.dst_gpu), before[c.expert].end());
    want.emplace(c.src_endpoint, c.dst_gpu);
  }
  EXPECT_EQ(copies_in(plan_batch(*periodic, ctx, 1, same_every_layer(b)), layer, model.expert_bytes()), want);
  EXPECT_TRUE(copies_in(plan_batch(*kept, ctx, 1, same_every_layer(b)), layer, model.expert_bytes()).empty());
  // Re-placing for the same loads moves nothing.
  EXPECT_TRUE(copies_in(plan_batch(*periodic, ctx, 2, same_every_layer(b)), layer, model.expert_bytes()).empty());
}

TEST(EplbScenario, RebalancingUnderFluctuatingRoutingMovesWeightsInLaterBatches) {
  const char* text = R"(name: eplb-moves
seed: 2
model: {preset: switch-base-64, layers: 4}
hardware: dgx1-v100
workload: {batch_size: 16, seq_len: 64, batches: 4, routing: {kind: fluctuating, hot_experts: 4}}
policy: [{name: eplb, label: kept}, {name: eplb, label: periodic, rebalance_every: 1}]
output: {trace: true}
)";
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "eplb-moves";
  std::filesystem::create_directories(dir);
  run_scenario(load_scenario_text(text, "eplb.yaml"), dir.string());
  auto fetch_bytes_per_batch = [&](const std::string& label) {
    std::ifstream f(dir / ("trace-" + label + ".json"));
    const nlohmann::json trace = nlohmann::json::parse(f);
    const auto& events = trace.is_array() ? trace : trace["traceEvents"];
    std::vector<double> bytes(4, 0.0);
    for (const auto& e : events)
      if (e.value("cat", "") == "fetch") bytes[e["args"]["batch"].get<int>()] += e["args"]["bytes"].get<double>();
    return bytes;
  };
  EXPECT_EQ(fetch_bytes_per_batch("kept"), std::vector<double>(4, 0.0));
  const auto moved = fetch_bytes_per_batch("periodic");
  EXPECT_EQ(moved[0], 0.0);
  for (int b = 1; b < 4; ++b) EXPECT_GT(moved[b], 0.0) << "batch " << b;
}

TEST_F(EplbPlan, IndivisibleSlotsAreAnInputError) {
  auto policy = make_eplb(1);  // 8 + 1 = 9 replicas on 4 GPUs
  EXPECT_THROW(policy->setup(ctx), InputError);
  try {
    policy->setup(ctx);
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("8 + 1 = 9"), std::string::npos) << e.what();
  }
}

}  // namespace moesim
