// harmoeny (HarMoEny §IV): Algorithm 2 on the paper's Fig. 5 example and on random schedules
// (threshold, average cap, stopping rule, conservation), Eq. 4's q, the dispatch's fetch lists,
// the plan it builds (metadata all-gather, schedule delay, fetches, restores), and scenario-level
// directions: skew, async vs sync fetching, uniform routing, and q gating small batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "hardware/host_cost.hpp"
#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "serving/batch_planner.hpp"
#include "policies/harmoeny.hpp"
#include "tests/support/policy_fixtures.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

using testing_support::fixed_routing;
using testing_support::make_policy;

// Fig. 5: 3 GPUs with 5 tokens each; experts 0, 1, 2 on GPUs 0, 1, 2 receive 2, 4 and 9 tokens.
TokenSchedule figure5() {
  LayerRouting r;
  r.num_experts = 3;
  r.experts = {0, 0, 1, 2, 2, /*GPU 1*/ 1, 1, 1, 2, 2, /*GPU 2*/ 2, 2, 2, 2, 2};
  r.num_tokens = 15;
  const std::vector<int> home{0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2};
  return harmoeny_initial_schedule(r, home, {0, 1, 2}, 3);
}

// A random schedule with a few heavy (source, expert, destination) entries.
TokenSchedule random_schedule(std::mt19937& rng, int G, int E) {
  TokenSchedule s(G, E);
  std::uniform_int_distribution<int> small(0, 20), heavy(0, 600), coin(0, 9);
  for (int f = 0; f < G; ++f)
    for (int e = 0; e < E; ++e)
      for (int g = 0; g < G; ++g) s(f, e, g) = coin(rng) == 0 ? heavy(rng) : (coin(rng) < 3 ? small(rng) : 0);
  return s;
}

std::vector<std::int64_t> per_source_expert(const TokenSchedule& s) {
  std::vector<std::int64_t> v;
  for (int f = 0; f < s.gpus(); ++f)
    for (int e = 0; e < s.experts(); ++e) {
      std::int64_t n = 0;
      for (int g = 0; g < s.gpus(); ++g) n += s(f, e, g);
      v.push_back(n);
    }
  return v;
}

}  // namespace

TEST(HarmoenyRebalance, PaperFigure5Example) {
  TokenSchedule s = figure5();
  EXPECT_EQ(s.per_destination(), (std::vector<std::int64_t>{2, 4, 9}));
  const auto moves = harmoeny_rebalance(s, 1);
  EXPECT_EQ(s.per_destination(), (std::vector<std::int64_t>{5, 5, 5}));
  // GPU 2's own 5 tokens fill GPU 0 up to t_avg = 5 (3 tokens); then the sources tie at 2 tokens
  // each and the lowest index (GPU 0) gives 1 token to GPU 1. Expert 2 now runs on every GPU.
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_EQ((std::vector<int>{moves[0].from, moves[0].expert, moves[0].overloaded, moves[0].to}),
            (std::vector<int>{2, 2, 2, 0}));
  EXPECT_EQ(moves[0].tokens, 3);
  EXPECT_EQ((std::vector<int>{moves[1].from, moves[1].expert, moves[1].overloaded, moves[1].to}),
            (std::vector<int>{0, 2, 2, 1}));
  EXPECT_EQ(moves[1].tokens, 1);
  for (int g = 0; g < 3; ++g) EXPECT_GT(s(0, 2, g) + s(1, 2, g) + s(2, 2, g), 0) << "GPU " << g;
}

TEST(HarmoenyRebalance, ThresholdStopsEarly) {
  // q = 6: the largest slice (5 tokens) is below q, nothing moves.
  TokenSchedule s = figure5();
  EXPECT_TRUE(harmoeny_rebalance(s, 6).empty());
  EXPECT_EQ(s, figure5());
  // q = 4: a 5-token slice exists but GPU 0 (2 tokens) would pass t_avg with 4 more.
  EXPECT_TRUE(harmoeny_rebalance(s, 4).empty());
  EXPECT_EQ(s, figure5());
  // q = 3: one move of 3 tokens, then the largest slice (2) is below q.
  const auto moves = harmoeny_rebalance(s, 3);
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].tokens, 3);
  EXPECT_EQ(s.per_destination(), (std::vector<std::int64_t>{5, 4, 6}));
  EXPECT_THROW(harmoeny_rebalance(s, 0), std::invalid_argument);
}

TEST(HarmoenyRebalance, MovesRespectThresholdAverageAndConserveTokens) {
  std::mt19937 rng(12345);
  int moved = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int G = 2 + trial % 7, E = 1 + (trial * 7) % 19;
    const std::int64_t q = std::vector<std::int64_t>{1, 5, 40, 300}[trial % 4];
    const TokenSchedule before = random_schedule(rng, G, E);
    TokenSchedule s = before;
    const auto moves = harmoeny_rebalance(s, q);
    const std::int64_t t_avg = before.total() / G;
    // Replaying the moves reproduces the result, and each move obeys Alg. 2's rules.
    TokenSchedule replay = before;
    std::vector<std::int64_t> t = before.per_destination();
    for (const auto& m : moves) {
      EXPECT_GE(m.tokens, q) << "trial " << trial;
      EXPECT_GT(t[m.overloaded], t_avg);
      EXPECT_GE(replay(m.from, m.expert, m.overloaded), m.tokens);
      replay(m.from, m.expert, m.overloaded) -= m.tokens;
      replay(m.from, m.expert, m.to) += m.tokens;
      t[m.overloaded] -= m.tokens;
      t[m.to] += m.tokens;
      EXPECT_LE(t[m.to], t_avg) << "g_min filled above t_avg in trial " << trial;
    }
    moved += static_cast<int>(moves.size());
    EXPECT_EQ(replay, s);
    EXPECT_EQ(t, s.per_destination());
    // Conservation: every selection still goes to exactly one GPU, from the same source for the
    // same expert; nothing goes negative.
    EXPECT_EQ(s.total(), before.total());
    EXPECT_EQ(per_source_expert(s), per_source_expert(before));
    for (int f = 0; f < G; ++f)
      for (int e = 0; e < E; ++e)
        for (int g = 0; g < G; ++g) EXPECT_GE(s(f, e, g), 0);
    // With q = 1 a move is always possible while a GPU with room exists: it ends balanced, or
    // with every GPU at t_avg or above (only the remainder of the floor is left over).
    if (q == 1) {
      const auto [lo, hi] = std::minmax_element(t.begin(), t.end());
      EXPECT_TRUE(*hi <= t_avg || *lo >= t_avg) << "trial " << trial;
    }
  }
  EXPECT_GT(moved, 100);  // the random schedules do exercise the loop
}

TEST(HarmoenySchedule, InitialScheduleCountsEverySelection) {
  LayerRouting r;
  r.top_k = 2;
  r.num_experts = 4;
  r.num_tokens = 3;
  r.experts = {0, 3, 1, 3, 2, 0};
  const TokenSchedule s = harmoeny_initial_schedule(r, {0, 1, 1}, {0, 0, 1, 1}, 2);
  EXPECT_EQ(s.total(), 6);
  EXPECT_EQ(s(0, 0, 0), 1);
  EXPECT_EQ(s(0, 3, 1), 1);
  EXPECT_EQ(s(1, 3, 1), 1);
  EXPECT_EQ(s(1, 0, 0), 1);
  EXPECT_EQ(s.per_destination(), (std::vector<std::int64_t>{3, 3}));
}

TEST(HarmoenyDispatch, FetchesOnlyNonResidentAndCountsFreeBuffers) {
  // 2 GPUs, experts {0, 1, 2} on GPU 0 and {3, 4, 5} on GPU 1.
  const ExpertPlacement layout = ExpertPlacement::from_owner({0, 0, 0, 1, 1, 1}, 2);
  TokenSchedule s(2, 6);
  s(0, 0, 0) = 10;  // resident on GPU 0
  s(1, 0, 1) = 7;   // expert 0 moved to GPU 1
  s(0, 4, 0) = 3;   // expert 4 moved to GPU 0
  s(0, 5, 1) = 2;   // resident on GPU 1
  s(1, 2, 1) = 1;   // expert 2 moved to GPU 1
  const Dispatch d = harmoeny_dispatch(s, layout);
  EXPECT_EQ(d.fetch[0], (std::vector<int>{4}));
  EXPECT_EQ(d.fetch[1], (std::vector<int>{0, 2}));
  // GPU 0: experts 1 and 2 have no tokens there; GPU 1: experts 3 and 4.
  EXPECT_EQ(d.free_buffers, (std::vector<int>{2, 2}));
  EXPECT_EQ(d.send[0], (std::vector<std::int64_t>{13, 2}));
  EXPECT_EQ(d.send[1], (std::vector<std::int64_t>{0, 8}));
  EXPECT_EQ(d.load[1], (std::vector<std::int64_t>{7, 0, 1, 0, 0, 2}));
  EXPECT_EQ(d.dropped, 0);
}

TEST(HarmoenyThreshold, Eq4OnKnownGpus) {
  ModelSpec sw = model_presets().get("switch-base-128").value;
  const ModelSpec qwen = model_presets().get("qwen1.5-moe-a2.7b").value;
  const ClusterSpec v100 = cluster_presets().get("dgx1-v100").value;
  // V100 fp32 15.7 TFLOP/s, 4 bytes, PCIe gen3 x16 15.75 GB/s: 1993.65... -> 1994.
  EXPECT_EQ(harmoeny_eq4_threshold(sw, v100), 1994);
  EXPECT_EQ(harmoeny_eq4_threshold(sw, v100),
            static_cast<std::int64_t>(std::ceil(15.7e12 * 4.0 / (2.0 * 15.75e9))));
  // Qwen is bf16, which V100 lacks: it runs at the fp32 rate with 2-byte weights.
  EXPECT_EQ(harmoeny_eq4_threshold(qwen, v100), static_cast<std::int64_t>(std::ceil(15.7e12 * 2.0 / (2.0 * 15.75e9))));
  // A100 bf16 312 TFLOP/s over PCIe gen4 31.5 GB/s: 9905.
  EXPECT_EQ(harmoeny_eq4_threshold(qwen, cluster_presets().get("dgx-a100").value), 9905);
  // A faster host link lowers q.
  ClusterSpec fast = v100;
  fast.pcie_bandwidth_GBps *= 4;
  EXPECT_LT(harmoeny_eq4_threshold(sw, fast), harmoeny_eq4_threshold(sw, v100));
}

namespace {

// Switch-128 (2 MoE layers) on a DGX-1, one sequence of T tokens per GPU. GPU 0 is the most
// loaded (for slice >= 1243) and source GPU 1's `slice` tokens of expert 0 are the largest
// contribution to it, so Alg. 2's first move is that slice, to GPU 7, which is empty.
class HarmoenyPlan : public ::testing::Test {
 protected:
  static constexpr std::int64_t T = 4096;
  ModelSpec model = [] {
    ModelSpec m = model_presets().get("switch-base-128").value;
    m.layers = 4;
    return m;
  }();
  Cluster cluster{cluster_presets().get("dgx1-v100").value};
  PrefillWorkload wl{8, T, 1};
  PolicyContext ctx{model, cluster, wl};

  std::vector<LayerRouting> gated(std::int64_t slice) const {
    LayerRouting r;
    r.num_experts = model.experts;
    auto add = [&](int expert, std::int64_t n) {
      r.experts.insert(r.experts.end(), static_cast<std::size_t>(n), expert);
    };
    add(16, T);  // GPU 0's tokens: all to GPU 1
    add(0, slice);
    add(16, T - slice);
    for (int g = 2; g < 7; ++g) {  // smaller slices to GPU 0, the rest stays home
      add(1, slice - 100);
      add(16 * g, T - slice + 100);
    }
    add(32, T);  // GPU 7's tokens: all to GPU 2
    r.num_tokens = static_cast<std::int64_t>(r.experts.size());
    return std::vector<LayerRouting>(model.num_moe_layers(), r);
  }

  BatchPlan plan(const YAML::Node& opts, const std::vector<LayerRouting>& routing,
                 const std::string& name = "harmoeny") {
    policy = make_policy(name, opts);
    policy->setup(ctx);
    return plan_batch(*policy, ctx, 0, routing);
  }

  static int count(const BatchPlan& bp, TaskKind kind, Phase phase) {
    return static_cast<int>(std::count_if(bp.graph.tasks().begin(), bp.graph.tasks().end(),
                                          [&](const Task& t) { return t.kind == kind && t.phase == phase; }));
  }

  std::unique_ptr<Policy> policy;
};

YAML::Node opts(std::initializer_list<std::pair<const char*, const char*>> kv) {
  YAML::Node n(YAML::NodeType::Map);
  for (const auto& [k, v] : kv) n[k] = v;
  return n;
}

}  // namespace

TEST_F(HarmoenyPlan, DefaultQIsEq4) {
  const std::int64_t q = harmoeny_eq4_threshold(model, cluster.spec());
  // A slice of exactly q tokens moves (to the empty GPU 7); one token fewer does not.
  EXPECT_GT(plan(opts({}), gated(q)).moe[0].gpu_tokens[7], 0);
  EXPECT_EQ(plan(opts({}), gated(q - 1)).moe[0].gpu_tokens[7], 0);
}

TEST_F(HarmoenyPlan, ExplicitQOverrides) {
  // Above the default (1994): a 3000-token slice that the default moves stays.
  EXPECT_GT(plan(opts({}), gated(3000)).moe[0].gpu_tokens[7], 0);
  EXPECT_EQ(plan(opts({{"q", "3001"}}), gated(3000)).moe[0].gpu_tokens[7], 0);
  // Below it: a 1500-token slice moves with q = 1500, not with 1501.
  EXPECT_EQ(plan(opts({{"q", "1501"}}), gated(1500)).moe[0].gpu_tokens[7], 0);
  const BatchPlan moved = plan(opts({{"q", "1500"}}), gated(1500));
  for (const auto& moe : moved.moe) {
    EXPECT_GT(moe.gpu_tokens[7], 0);
    EXPECT_EQ(std::accumulate(moe.gpu_tokens.begin(), moe.gpu_tokens.end(), std::int64_t{0}), 8 * T);
    EXPECT_EQ(moe.tokens_dropped, 0);
  }
}

TEST_F(HarmoenyPlan, NoRebalanceMatchesStaticEp) {
  const auto routing = gated(3000);
  const BatchPlan st = plan(opts({}), routing, "static-ep");
  const BatchPlan off = plan(opts({{"rebalance", "false"}}), routing);
  const BatchPlan on = plan(opts({}), routing);
  auto scatter = [](const BatchPlan& bp) {
    std::vector<std::tuple<int, int, int, double>> flows;
    for (const Task& t : bp.graph.tasks())
      if (t.kind == TaskKind::kTransfer && t.phase == phase::kDispatch)
        flows.emplace_back(t.layer, t.src, t.dst, t.bytes);
    std::sort(flows.begin(), flows.end());
    return flows;
  };
  for (std::size_t l = 0; l < st.moe.size(); ++l) EXPECT_EQ(off.moe[l].gpu_tokens, st.moe[l].gpu_tokens);
  EXPECT_EQ(scatter(off), scatter(st));
  EXPECT_EQ(count(off, TaskKind::kTransfer, phase::kFetch), 0);
  EXPECT_NE(on.moe[0].gpu_tokens, st.moe[0].gpu_tokens);  // the default does rebalance here
}

TEST_F(HarmoenyPlan, MetadataAllGatherScheduleDelayAndFetches) {
  const BatchPlan bp = plan(opts({{"schedule_us", "33"}}), gated(3000));
  const int G = cluster.num_gpus(), layers = model.num_moe_layers();
  // Ring all-gather of E int64 counters per GPU: G(G-1) chunks of 8E bytes over all channels.
  double gathered = 0.0;
  int delays = 0;
  for (const Task& t : bp.graph.tasks()) {
    if (t.kind == TaskKind::kTransfer && t.phase == phase::kCollective) gathered += t.bytes;
    if (t.kind == TaskKind::kDelay && t.phase == phase::kSchedule) {
      // Host work over the E x G counts, 33 us on the reference host; twice as fast a host halves it.
      const auto work = bp.graph.ops_of(t);
      ASSERT_EQ(work.size(), 1u);
      EXPECT_EQ(work[0].kind, OpKind::kHost);
      EXPECT_STREQ(work[0].name, "harmoeny.schedule");
      EXPECT_EQ(work[0].m, static_cast<std::int64_t>(model.experts) * G);
      EXPECT_EQ(HostCostModel().time(work[0]), us_to_ticks(33.0));
      EXPECT_EQ(HostCostModel(2.0).time(work[0]), us_to_ticks(16.5));
      ++delays;
    }
  }
  EXPECT_NEAR(gathered, static_cast<double>(layers * G * (G - 1)) * 8.0 * model.experts, 1e-6);
  EXPECT_EQ(delays, layers * G);
  // Every fetch comes from host memory on the host-to-device engine; restoring the overwritten
  // buffers doubles them.
  for (const Task& t : bp.graph.tasks()) {
    if (t.kind != TaskKind::kTransfer || t.phase != phase::kFetch) continue;
    EXPECT_GE(t.src, G);
    EXPECT_EQ(t.engine, CopyEngine::kHostToDevice);
    EXPECT_EQ(t.bytes, model.expert_bytes());
  }
  const int fetches = count(bp, TaskKind::kTransfer, phase::kFetch);
  EXPECT_GT(fetches, 0);
  const BatchPlan no_restore = plan(opts({{"schedule_us", "33"}, {"restore", "false"}}), gated(3000));
  EXPECT_EQ(fetches, 2 * count(no_restore, TaskKind::kTransfer, phase::kFetch));
  // The static layout is all the memory it needs.
  const std::vector<double> mem = policy->expert_memory_bytes(ctx);
  for (int g = 0; g < G; ++g)
    EXPECT_DOUBLE_EQ(mem[g], 16.0 * model.expert_bytes() * layers) << "GPU " << g;
}

TEST_F(HarmoenyPlan, InputErrors) {
  auto zero_q = make_policy("harmoeny", opts({{"q", "0"}}));
  EXPECT_THROW(zero_q->setup(ctx), InputError);
  ModelSpec few = model_presets().get("switch-base-8").value;
  const Cluster sixteen(testing_support::full_mesh(1, 16));
  auto p = make_policy("harmoeny", opts({}));
  EXPECT_THROW(p->setup(PolicyContext{few, sixteen, wl}), InputError);
}

namespace {

// Switch-128 with 2 MoE layers on a DGX-1 under HarMoEny's router skew (§V-A), one hot expert.
nlohmann::json run_skew(double alpha, std::int64_t batch_size, const std::string& policies) {
  const std::string yaml = "name: harmoeny-test\nseed: 3\nmodel: {preset: switch-base-128, layers: 4}\n"
                           "hardware: dgx1-v100\n"
                           "workload: {batch_size: " + std::to_string(batch_size) +
                           ", seq_len: 128, batches: 2, routing: {kind: skewed, alpha: " + std::to_string(alpha) +
                           ", hot_experts: 1}}\npolicy: " + policies + "\n";
  return run_scenario(load_scenario_text(yaml, "test.yaml"))["runs"];
}
double latency(const nlohmann::json& run) { return run["metrics"]["layer_latency_ms"]["mean"].get<double>(); }
double idle(const nlohmann::json& run) { return run["metrics"]["gpu_idle_fraction"]["mean"].get<double>(); }

const char* kAblation = "[static-ep, harmoeny, {name: harmoeny, label: sync, fetch: sync}]";

}  // namespace

// 256 x 128 tokens: each GPU's slice of the hot expert is ~0.9 x 4096 = 3700 selections, above
// Eq. 4's q = 1994 on V100 fp32, so Alg. 2 can move whole slices.
TEST(HarmoenyScenario, SkewedBeatsStaticAndAsyncBeatsSync) {
  const auto runs = run_skew(0.9, 256, kAblation);
  const auto &st = runs[0], &async = runs[1], &sync = runs[2];
  EXPECT_LT(latency(async), 0.5 * latency(st));
  EXPECT_LT(idle(async), 0.5 * idle(st));
  EXPECT_GT(idle(st), 0.5);  // static-ep: the hot GPU computes while the others wait
  EXPECT_LT(async["metrics"]["load"]["gpu_max_over_mean"].get<double>(), 1.1);
  // Overlapping the fetch with the GPU's own experts beats waiting for it (§V-C1).
  EXPECT_LT(latency(async), latency(sync));
  EXPECT_LT(latency(sync), latency(st));
}

TEST(HarmoenyScenario, UniformRoutingCostsAboutTheSameAsStaticEp) {
  const auto runs = run_skew(0.0, 256, "[static-ep, harmoeny]");
  EXPECT_NEAR(latency(runs[1]) / latency(runs[0]), 1.0, 0.03);
  // The metadata exchange and the schedule are extra work, never a saving.
  EXPECT_GE(latency(runs[1]), latency(runs[0]));
}

// 64 x 128 tokens: hot slices of ~920 selections are below Eq. 4's q, so the default moves
// nothing; q = 256 lets Alg. 2 move them.
TEST(HarmoenyScenario, ThresholdGatesSmallSlices) {
  const auto runs = run_skew(0.9, 64, "[static-ep, harmoeny, {name: harmoeny, label: q256, q: 256}]");
  EXPECT_EQ(runs[1]["metrics"]["load"]["gpu_max_over_mean"], runs[0]["metrics"]["load"]["gpu_max_over_mean"]);
  EXPECT_NEAR(latency(runs[1]) / latency(runs[0]), 1.0, 0.03);
  EXPECT_LT(latency(runs[2]), 0.9 * latency(runs[0]));
  EXPECT_LT(idle(runs[2]), 0.5 * idle(runs[0]));
}

}  // namespace moesim
