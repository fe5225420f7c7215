// fastermoe (FasterMoE shadowing as HarMoEny's baseline, §III, §V-A/B): shadowed experts'
// selections stay on their home GPU, each shadowed expert is broadcast to the G - 1 other GPUs
// after routing, the default byte criterion flips at its break-even, the threshold, memory and
// max_shadowed bounds hold, uniform routing shadows nothing, and high skew beats static-ep.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "sim/flow_network.hpp"
#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "hardware/cost_model.hpp"
#include "models/model_spec.hpp"
#include "models/operators.hpp"
#include "serving/batch_planner.hpp"
#include "policies/memory.hpp"
#include "sim/plan_executor.hpp"
#include "tests/support/policy_fixtures.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

using testing_support::fixed_routing;
using testing_support::make_policy;

// Top-1 routing from an explicit expert per token.
LayerRouting routing_of(std::vector<std::int32_t> experts, int num_experts) {
  LayerRouting r;
  r.num_experts = num_experts;
  r.num_tokens = static_cast<std::int64_t>(experts.size());
  r.experts = std::move(experts);
  return r;
}

class FasterMoePlan : public ::testing::Test {
 protected:
  ModelSpec model = model_presets().get("switch-base-8").value;  // contiguous: expert e on GPU e / 2
  Cluster cluster{testing_support::full_mesh(1, 4)};
  PrefillWorkload wl{8, 16, 1};  // 128 tokens, 32 per home GPU
  PolicyContext ctx{model, cluster, wl};

  std::unique_ptr<Policy> make(double threshold, int max_shadowed = -1, const PolicyContext* c = nullptr) {
    YAML::Node opts;
    opts["threshold"] = threshold;
    opts["max_shadowed"] = max_shadowed;
    auto p = make_policy("fastermoe", opts);
    p->setup(c ? *c : ctx);
    return p;
  }
  BatchPlan plan(Policy& p, const LayerRouting& r, const PolicyContext* c = nullptr) {
    return plan_batch(p, c ? *c : ctx, 0, std::vector<LayerRouting>(model.num_moe_layers(), r));
  }
  /// What the first MoE layer of a plan broadcast: how many experts, from which owners.
  struct Shadowing {
    int experts = 0;
    std::set<int> owners;
  };
  // Checks that every copy is a whole expert on the peer engine and that each owner's copies
  // reach every other GPU equally often (a broadcast per shadowed expert).
  Shadowing shadowed(const BatchPlan& bp) const {
    std::map<int, std::map<int, int>> sent;  // owner -> destination -> copies
    int layer = -1, copies = 0;
    for (const Task& t : bp.graph.tasks()) {
      if (t.kind != TaskKind::kTransfer || t.phase != phase::kFetch) continue;
      if (layer < 0) layer = t.layer;
      if (t.layer != layer) continue;
      EXPECT_DOUBLE_EQ(t.bytes, model.expert_bytes());
      EXPECT_EQ(t.engine, CopyEngine::kPeer);
      ++sent[t.src][t.dst];
      ++copies;
    }
    Shadowing s;
    for (const auto& [src, to] : sent) {
      EXPECT_EQ(to.size(), 3u) << "owner " << src << " must reach the G - 1 = 3 other GPUs";
      for (const auto& [dst, n] : to) EXPECT_EQ(n, to.begin()->second);
      s.owners.insert(src);
    }
    EXPECT_EQ(copies % 3, 0);
    s.experts = copies / 3;
    return s;
  }
  // Selections the first MoE layer's scatter moves from src to dst.
  std::vector<std::vector<double>> scattered(const BatchPlan& bp) const {
    std::vector<std::vector<double>> sent(4, std::vector<double>(4, 0.0));
    int layer = -1;
    for (const Task& t : bp.graph.tasks()) {
      if (t.kind != TaskKind::kTransfer || t.phase != phase::kDispatch) continue;
      if (layer < 0) layer = t.layer;
      if (t.layer == layer) sent[t.src][t.dst] += t.bytes / token_bytes(model);
    }
    return sent;
  }
};

// Expert 0 takes every other token (16 per home GPU); the rest go round the other experts.
LayerRouting hot_everywhere(std::int64_t tokens) {
  std::vector<std::int32_t> e;
  for (std::int64_t t = 0; t < tokens; ++t) e.push_back(t % 2 == 0 ? 0 : 1 + static_cast<int>((t / 2) % 7));
  return routing_of(std::move(e), 8);
}

}  // namespace

TEST_F(FasterMoePlan, ShadowedTokensStayHomeAndTheExpertIsBroadcast) {
  auto p = make(2.0);  // mean 16: expert 0 (64) is above 32, no other expert is
  const LayerRouting r = hot_everywhere(128);
  const BatchPlan bp = plan(*p, r);
  const Shadowing sh = shadowed(bp);
  EXPECT_EQ(sh.experts, 1);
  EXPECT_EQ(sh.owners, (std::set<int>{0}));
  // Expected scatter: expert 0 computed at home, every other selection to its owner e / 2.
  std::vector<std::vector<double>> want(4, std::vector<double>(4, 0.0));
  for (std::int64_t t = 0; t < 128; ++t) {
    const int home = static_cast<int>(t / 32), e = r.expert(t, 0);
    if (e != 0 && home != e / 2) want[home][e / 2] += 1.0;
  }
  EXPECT_EQ(scattered(bp), want);
  for (const auto& moe : bp.moe) {
    // GPU g computes its 16 home selections of expert 0 plus its own experts' selections.
    std::vector<std::int64_t> expect(4, 16);
    for (std::int64_t t = 0; t < 128; ++t)
      if (r.expert(t, 0) != 0) ++expect[r.expert(t, 0) / 2];
    EXPECT_EQ(moe.gpu_tokens, expect);
  }
}

TEST_F(FasterMoePlan, BroadcastWaitsForEveryRouter) {
  // The decision needs the gate output: no copy of a layer starts before all its routers end.
  auto p = make(2.0);
  const BatchPlan bp = plan(*p, hot_everywhere(128));
  Simulator sim;
  FlowNetwork net(sim);
  cluster.install(net);
  const ComputeCostModel cost = ComputeCostModel::for_cluster(cluster.spec());
  PlanExecutor exec(sim, net, 4, engine_hooks(cluster, cost));
  const auto timing = exec.run(bp.graph);
  std::map<int, Tick> routed;
  for (TaskId id = 0; id < bp.graph.size(); ++id)
    if (bp.graph.task(id).phase == phase::kRouter)
      routed[bp.graph.task(id).layer] = std::max(routed[bp.graph.task(id).layer], timing[id].end);
  int copies = 0;
  for (TaskId id = 0; id < bp.graph.size(); ++id) {
    const Task& t = bp.graph.task(id);
    if (t.kind != TaskKind::kTransfer || t.phase != phase::kFetch) continue;
    EXPECT_GE(timing[id].start, routed.at(t.layer));
    ++copies;
  }
  EXPECT_EQ(copies, 3 * model.num_moe_layers());
}

TEST_F(FasterMoePlan, ThresholdShadowsExpertsAboveAMultipleOfTheMean) {
  const LayerRouting r = fixed_routing({40, 30, 20, 10, 8, 8, 8, 4});  // mean 16
  const Shadowing above_24 = shadowed(plan(*make(1.5), r));  // experts 0, 1 (both on GPU 0)
  EXPECT_EQ(above_24.experts, 2);
  EXPECT_EQ(above_24.owners, (std::set<int>{0}));
  const Shadowing above_17 = shadowed(plan(*make(1.1), r));  // and expert 2 (GPU 1)
  EXPECT_EQ(above_17.experts, 3);
  EXPECT_EQ(above_17.owners, (std::set<int>{0, 1}));
  EXPECT_EQ(shadowed(plan(*make(3.0), r)).experts, 0);  // > 48: none
}

TEST_F(FasterMoePlan, MaxShadowedKeepsTheMostLoaded) {
  const LayerRouting r = fixed_routing({10, 8, 40, 30, 20, 8, 8, 4});
  // Candidates above 17.6, most loaded first: experts 2 (40) and 3 (30) on GPU 1, 4 (20) on GPU 2.
  const std::vector<std::set<int>> owners{{1}, {1}, {1, 2}};
  for (int k = 1; k <= 3; ++k) {
    const Shadowing sh = shadowed(plan(*make(1.1, k), r));
    EXPECT_EQ(sh.experts, k);
    EXPECT_EQ(sh.owners, owners[k - 1]);
  }
}

TEST_F(FasterMoePlan, MemoryBoundsShadowing) {
  // Room for one expert buffer per GPU: only the most loaded candidate is shadowed.
  const auto free = memory_headroom(*make(1.1), ctx);
  ClusterSpec spec = testing_support::full_mesh(1, 4);
  spec.gpu.memory_bytes -= *std::min_element(free.begin(), free.end()) - 1.5 * model.expert_bytes();
  const Cluster tight(spec);
  const PolicyContext tctx{model, tight, wl};
  const LayerRouting r = fixed_routing({10, 8, 40, 30, 20, 8, 8, 4});
  const BatchPlan bp = plan(*make(1.1, -1, &tctx), r, &tctx);
  // Expert 2 (GPU 1) fills a buffer on GPUs 0, 2, 3; expert 3 (GPU 1) and 4 (GPU 2) then find
  // GPU 0 full.
  const Shadowing sh = shadowed(bp);
  EXPECT_EQ(sh.experts, 1);
  EXPECT_EQ(sh.owners, (std::set<int>{1}));
  // No memory at all: nothing is shadowed, as static-ep.
  spec.gpu.memory_bytes -= model.expert_bytes();
  const Cluster none(spec);
  const PolicyContext nctx{model, none, wl};
  EXPECT_EQ(shadowed(plan(*make(1.1, -1, &nctx), r, &nctx)).experts, 0);
}

TEST_F(FasterMoePlan, DefaultCriterionFlipsAtTheByteBreakEven) {
  // Shadow e when 2 · remote selections · token bytes > (G - 1) · expert bytes.
  const PrefillWorkload big{64, 512, 1};  // 32768 tokens, 8192 per home GPU
  const PolicyContext bctx{model, cluster, big};
  const double n_star = 3.0 * model.expert_bytes() / (2.0 * token_bytes(model));
  const auto above = static_cast<std::int64_t>(std::floor(n_star)) + 1, at = static_cast<std::int64_t>(std::floor(n_star));
  ASSERT_TRUE(above <= 16384 && at > 8192 && at <= 16384);
  // Expert 0 (GPU 0) gets `above` selections from homes 1-2 and expert 4 (GPU 2) `at` from homes
  // 0 and 3: only expert 0 is shadowed. Expert 6 (GPU 3) takes the rest: more selections than
  // the break-even in all, but most of them its own home's, so it is not.
  std::vector<std::int32_t> e(32768, 6);
  for (std::int64_t i = 0; i < at; ++i) e[i < 8192 ? i : 24576 + (i - 8192)] = 4;
  for (std::int64_t i = 0; i < above; ++i) e[8192 + i] = 0;
  ASSERT_GT(static_cast<double>(std::count(e.begin(), e.end(), 6)), n_star);
  auto p = make(0.0, -1, &bctx);
  const BatchPlan bp = plan(*p, routing_of(e, 8), &bctx);
  const Shadowing sh = shadowed(bp);
  EXPECT_EQ(sh.experts, 1);
  EXPECT_EQ(sh.owners, (std::set<int>{0}));
}

TEST_F(FasterMoePlan, UniformRoutingShadowsNothingByDefault) {
  EXPECT_EQ(shadowed(plan(*make(0.0), fixed_routing(std::vector<std::int64_t>(8, 16)))).experts, 0);
}

namespace {

const char* kSwitch = R"(name: shadow
seed: 4
model: {preset: switch-base-128, layers: 4}
hardware: dgx1-v100
workload: {batch_size: 64, seq_len: 512, batches: 2, routing: {kind: skewed, alpha: 0.9}}
policy: [static-ep, fastermoe]
)";

}  // namespace

TEST(FasterMoeScenario, BeatsStaticEpUnderHighSkew) {
  const auto r = run_scenario(load_scenario_text(kSwitch, "shadow.yaml"));
  const auto& s = r["runs"][0]["metrics"];
  const auto& f = r["runs"][1]["metrics"];
  EXPECT_LT(f["layer_latency_ms"]["mean"].get<double>(), s["layer_latency_ms"]["mean"].get<double>());
  EXPECT_LT(f["load"]["gpu_max_over_mean"].get<double>(), 0.5 * s["load"]["gpu_max_over_mean"].get<double>());
}

// Uniform routing: per expert, the selections crossing GPUs weigh far less than the weights'
// broadcast for these batch sizes, so fastermoe is static-ep (same bytes, same latency).
TEST(FasterMoeScenario, UniformRoutingIsStaticEp) {
  for (const char* extra : {"workload.routing.alpha=0.0", "model.preset=switch-base-8"}) {
    const auto r = run_scenario(load_scenario_text(kSwitch, "shadow.yaml", {"workload.routing.alpha=0.0", extra}));
    const auto& s = r["runs"][0]["metrics"];
    const auto& f = r["runs"][1]["metrics"];
    EXPECT_EQ(f["bytes"].dump(), s["bytes"].dump()) << extra;
    EXPECT_DOUBLE_EQ(f["layer_latency_ms"]["mean"].get<double>(), s["layer_latency_ms"]["mean"].get<double>());
  }
}

}  // namespace moesim
