// tp-experts (AMoE §2.1, MoE-GPS §2): expert slices of 1/G per GPU, identical per-GPU compute
// (MoEShard's), and the bytes of its ring all-gather and all-reduce against the ring formulas.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <numeric>
#include <tuple>
#include <string>

#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "hardware/cost_model.hpp"
#include "models/operators.hpp"
#include "serving/batch_planner.hpp"
#include "tests/support/policy_fixtures.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

using testing_support::bytes_into;
using testing_support::fixed_routing;
using testing_support::ops_of_phase;
using testing_support::plan_with;

std::unique_ptr<Policy> make(const std::string& name) { return testing_support::make_policy(name, YAML::Node()); }

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

class TpExpertsPlan : public ::testing::Test {
 protected:
  ModelSpec model = model_presets().get("switch-base-8").value;
  Cluster cluster{testing_support::full_mesh(1, 4, 100.0)};
  PrefillWorkload wl{8, 16, 1};  // 128 tokens, 32 per GPU
  PolicyContext ctx{model, cluster, wl};
  int layer() const { return model.moe_offset; }  // the first MoE layer
};

}  // namespace

TEST_F(TpExpertsPlan, EachGpuHoldsOneGthOfEveryExpert) {
  auto tp = make("tp-experts");
  tp->setup(ctx);
  const double all = model.expert_bytes() * model.experts * model.num_moe_layers();
  for (double b : tp->expert_memory_bytes(ctx)) EXPECT_DOUBLE_EQ(b, all / 4);
}

// The same slices as MoEShard, so the same work on every GPU, whatever the skew.
TEST_F(TpExpertsPlan, ExpertComputeIsIdenticalOnEveryGpuAndEqualsMoeShards) {
  const ComputeCostModel cost = ComputeCostModel::for_cluster(cluster.spec());
  const LayerRouting skewed = fixed_routing({110, 10, 2, 2, 1, 1, 1, 1});
  auto tp = make("tp-experts");
  auto ms = make("moeshard");
  const auto tp_work = ops_of_phase(plan_with(*tp, ctx, skewed).graph, phase::kExperts, layer(), 4);
  const auto ms_work = ops_of_phase(plan_with(*ms, ctx, skewed).graph, phase::kExperts, layer(), 4);
  const Tick t0 = cost.ops_time(tp_work[0]);
  EXPECT_GT(t0, 0);
  for (int g = 0; g < 4; ++g) {
    EXPECT_EQ(cost.ops_time(tp_work[g]), t0) << "GPU " << g;
    EXPECT_EQ(cost.ops_time(ms_work[g]), t0) << "GPU " << g;
    ASSERT_EQ(tp_work[g].size(), ms_work[g].size());
    for (std::size_t i = 0; i < tp_work[g].size(); ++i) EXPECT_DOUBLE_EQ(tp_work[g][i].flops, ms_work[g][i].flops);
  }
}

// Ring all-gather of P bytes per GPU: each GPU receives (G-1)·P. Ring all-reduce of B bytes:
// each GPU receives 2(G-1)/G·B. P is the largest home block (NCCL all-gather takes equal shares)
// and B the gathered, padded block's output. Metadata: an all-gather of E int64 counters.
TEST_F(TpExpertsPlan, NetworkBytesMatchRingFormulas) {
  const double tb = token_bytes(model);
  const LayerRouting r128 = fixed_routing({60, 20, 10, 10, 10, 10, 4, 4});
  const LayerRouting r96 = fixed_routing({60, 10, 10, 4, 4, 4, 2, 2});
  for (const auto& [batch, max_home, r] : {std::tuple{8, 32.0, &r128}, std::tuple{6, 32.0, &r96}}) {
    wl = PrefillWorkload{batch, 16, 1};
    auto tp = make("tp-experts");
    const BatchPlan bp = plan_with(*tp, ctx, *r);
    const auto gather = bytes_into(bp.graph, cluster, phase::kDispatch, layer());
    const auto reduce = bytes_into(bp.graph, cluster, phase::kCombine, layer());
    const auto meta = bytes_into(bp.graph, cluster, phase::kCollective, layer());
    for (int g = 0; g < 4; ++g) {
      EXPECT_NEAR(gather[g], 3 * max_home * tb, 1e-6) << "batch " << batch << " GPU " << g;
      EXPECT_NEAR(reduce[g], 2.0 * 3 / 4 * (4 * max_home) * tb, 1e-6) << "batch " << batch << " GPU " << g;
      EXPECT_NEAR(meta[g], 3.0 * model.experts * 8, 1e-9) << "batch " << batch << " GPU " << g;
    }
    for (const auto& moe : bp.moe) {
      EXPECT_EQ(moe.tokens_dropped, 0);
      for (auto n : moe.gpu_tokens) EXPECT_EQ(n, r->num_tokens);
    }
  }
}

// The all-reduce returns twice what MoEShard's gather does (a reduce-scatter would match it),
// and sums the partials on the way, so the home merge has no shard sum while MoEShard's sums G.
TEST_F(TpExpertsPlan, AllReduceMovesTwiceMoeShardsGatherAndSumsOnTheWay) {
  const LayerRouting r = fixed_routing({16, 16, 16, 16, 16, 16, 16, 16});
  auto tp = make("tp-experts");
  auto ms = make("moeshard");
  const BatchPlan tp_plan = plan_with(*tp, ctx, r);
  const BatchPlan ms_plan = plan_with(*ms, ctx, r);
  EXPECT_NEAR(sum(bytes_into(tp_plan.graph, cluster, phase::kCombine, layer())),
              2 * sum(bytes_into(ms_plan.graph, cluster, phase::kCombine, layer())), 1e-3);
  // Hidden states out: the all-gather and MoEShard's scatter move the same bytes.
  EXPECT_NEAR(sum(bytes_into(tp_plan.graph, cluster, phase::kDispatch, layer())),
              sum(bytes_into(ms_plan.graph, cluster, phase::kDispatch, layer())), 1e-3);
  auto shard_sum_flops = [&](const BatchPlan& bp) {
    double f = 0.0;
    const auto merge = ops_of_phase(bp.graph, phase::kMerge, layer(), 4);
    for (const Op& op : merge[0])
      if (std::strcmp(op.name, "combine.shard_sum") == 0) f += op.flops;
    return f;
  };
  EXPECT_DOUBLE_EQ(shard_sum_flops(ms_plan), 4.0 * 32 * model.hidden);
  EXPECT_DOUBLE_EQ(shard_sum_flops(tp_plan), 0.0);
}

// On the MoEShard set-up both sharded policies are balanced and beat static-ep under the §4
// skew; tp-experts spends longer on the network than MoEShard (ring all-reduce vs all-to-all).
TEST(TpExpertsScenario, BalancedAndMoreNetworkTimeThanMoeShard) {
  const auto r = run_scenario(load_scenario_text(R"(name: tp
seed: 4
model: {preset: switch-base-128, layers: 4}
hardware: hgx-a100-4gpu-nvlink
workload: {batch_size: 100, seq_len: 120, batches: 1, routing: {kind: moeshard, alpha_r: 0.6, k_r_fraction: 0.1}}
policy: [static-ep, moeshard, tp-experts]
)", "test.yaml"));
  std::map<std::string, nlohmann::json> m;
  for (const auto& run : r["runs"]) m[run["label"].get<std::string>()] = run["metrics"];
  const auto layer = [&](const char* p) { return m.at(p)["layer_latency_ms"]["mean"].get<double>(); };
  EXPECT_DOUBLE_EQ(m.at("tp-experts")["load"]["gpu_max_over_mean"].get<double>(), 1.0);
  EXPECT_GT(m.at("tp-experts")["alltoall_ms"].get<double>(), m.at("moeshard")["alltoall_ms"].get<double>());
  EXPECT_GT(layer("tp-experts"), layer("moeshard"));
  EXPECT_LT(layer("tp-experts"), layer("static-ep"));
}

}  // namespace moesim
