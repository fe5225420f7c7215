// moeshard (MoEShard §3): expert slices of 1/G per GPU, identical per-GPU compute under any skew,
// every selection computed, every token sent to every GPU, fused vs per-expert kernels, and the
// speedup over static expert parallelism on the paper's set-up (§4).
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <string>

#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "hardware/cost_model.hpp"
#include "models/operators.hpp"
#include "serving/batch_planner.hpp"
#include "policies/memory.hpp"
#include "tests/support/policy_fixtures.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

using testing_support::bytes_into;
using testing_support::fixed_routing;
using testing_support::ops_of_phase;
using testing_support::plan_with;

std::unique_ptr<Policy> make_moeshard(bool fused) {
  YAML::Node opts;
  opts["fused"] = fused;
  return testing_support::make_policy("moeshard", opts);
}

/// A readable fingerprint of an op list (names, shapes, groups, FLOPs, bytes).
std::string fingerprint(const std::vector<Op>& ops) {
  std::string s;
  for (const Op& op : ops) {
    s += std::string(op.name) + " " + std::to_string(op.m) + "x" + std::to_string(op.n) + "x" + std::to_string(op.k) +
         " b" + std::to_string(op.batch) + " f" + std::to_string(op.flops) + " B" + std::to_string(op.bytes) + " [";
    for (auto m : op.group_m) s += std::to_string(m) + ",";
    s += "]\n";
  }
  return s;
}

/// Top-2 routing over `experts`: every token picks expert 0 (heavily skewed) and one other.
LayerRouting top2_skewed(std::int64_t tokens, int experts) {
  LayerRouting r;
  r.top_k = 2;
  r.num_experts = experts;
  r.num_tokens = tokens;
  for (std::int64_t t = 0; t < tokens; ++t) {
    r.experts.push_back(0);
    r.experts.push_back(1 + static_cast<int>(t % (experts - 1)));
  }
  return r;
}

class MoeShardPlan : public ::testing::Test {
 protected:
  ModelSpec model = model_presets().get("switch-base-8").value;
  Cluster cluster{testing_support::full_mesh(1, 4, 100.0)};
  PrefillWorkload wl{8, 16, 1};  // 128 tokens, 32 per GPU
  PolicyContext ctx{model, cluster, wl};
  int first_moe_layer() const { return model.moe_offset; }
};

}  // namespace

TEST_F(MoeShardPlan, EachGpuHoldsOneGthOfEveryExpert) {
  auto policy = make_moeshard(true);
  policy->setup(ctx);
  const double all = model.expert_bytes() * model.experts * model.num_moe_layers();
  for (double b : policy->expert_memory_bytes(ctx)) EXPECT_DOUBLE_EQ(b, all / 4);
}

// Each GPU holds only its 1/G slice of a selection's intermediate, so for the same selections
// the activation estimate is smaller than an unsharded layout's by exactly that slice.
TEST_F(MoeShardPlan, ActivationsHoldOnlyTheIntermediateSlice) {
  auto shard = make_moeshard(true);
  auto whole = testing_support::make_policy("static-ep", YAML::Node(YAML::NodeType::Map));
  shard->setup(ctx);
  whole->setup(ctx);
  EXPECT_EQ(shard->expert_intermediate_width(ctx), model.expert_ffn / 4);
  const std::vector<std::int64_t> home{64, 64, 64, 64}, sel{100, 100, 100, 100};
  const auto a = estimate_memory(model, cluster, *shard, ctx, home, sel).activations;
  const auto b = estimate_memory(model, cluster, *whole, ctx, home, sel).activations;
  const double slice_saving = 100.0 * static_cast<double>(model.expert_ffn) * 0.75 * dtype_bytes(model.dtype);
  for (std::size_t g = 0; g < a.size(); ++g) EXPECT_DOUBLE_EQ(b[g] - a[g], slice_saving);
}

// MoEShard §1/§3: perfect balance whatever the routing. The static-ep contrast shows the
// comparison can tell unequal GPUs apart.
TEST_F(MoeShardPlan, ExpertComputeIsIdenticalOnEveryGpuUnderAnySkew) {
  const ComputeCostModel cost = ComputeCostModel::for_cluster(cluster.spec());
  const LayerRouting uniform = fixed_routing({16, 16, 16, 16, 16, 16, 16, 16});
  const LayerRouting skewed = fixed_routing({121, 1, 1, 1, 1, 1, 1, 1});
  for (const LayerRouting* r : {&uniform, &skewed}) {
    for (bool fused : {true, false}) {
      auto policy = make_moeshard(fused);
      const BatchPlan bp = plan_with(*policy, ctx, *r);
      const auto work = ops_of_phase(bp.graph, phase::kExperts, first_moe_layer(), 4);
      ASSERT_FALSE(work[0].empty());
      for (int g = 1; g < 4; ++g) {
        EXPECT_EQ(fingerprint(work[g]), fingerprint(work[0])) << "GPU " << g << " fused " << fused;
        EXPECT_EQ(cost.ops_time(work[g]), cost.ops_time(work[0]));
      }
    }
  }
  YAML::Node opts;
  opts["placement"] = "contiguous";
  auto ep = testing_support::make_policy("static-ep", opts);
  const auto ep_work = ops_of_phase(plan_with(*ep, ctx, skewed).graph, phase::kExperts, first_moe_layer(), 4);
  EXPECT_GT(cost.ops_time(ep_work[0]), 2 * cost.ops_time(ep_work[3]));
}

// Each GPU computes a 1/G slice of every selection: per GPU every selection, G × selections in
// all, and together exactly the GEMM FLOPs of the unsharded experts. Nothing is dropped.
TEST_F(MoeShardPlan, EverySelectionIsComputedAndNothingDropped) {
  for (int top_k : {1, 2}) {
    model.top_k = top_k;
    const LayerRouting r = top_k == 1 ? fixed_routing({100, 4, 4, 4, 4, 4, 4, 4}) : top2_skewed(128, 8);
    const std::int64_t selections = r.num_tokens * top_k;
    auto policy = make_moeshard(true);
    const BatchPlan bp = plan_with(*policy, ctx, r);
    ASSERT_EQ(bp.moe.size(), static_cast<std::size_t>(model.num_moe_layers()));
    for (const auto& moe : bp.moe) {
      EXPECT_EQ(moe.tokens_dropped, 0);
      for (auto n : moe.gpu_tokens) EXPECT_EQ(n, selections);
      EXPECT_EQ(std::accumulate(moe.gpu_tokens.begin(), moe.gpu_tokens.end(), std::int64_t{0}), 4 * selections);
    }
    double gemm_flops = 0.0;
    for (const auto& ops : ops_of_phase(bp.graph, phase::kExperts, first_moe_layer(), 4))
      for (const Op& op : ops)
        if (op.kind == OpKind::kGroupedGemm) gemm_flops += op.flops;
    double unsharded = 0.0;
    for (const Op& op : expert_ops(model, r.expert_counts()))
      if (op.kind == OpKind::kGroupedGemm) unsharded += op.flops;
    EXPECT_DOUBLE_EQ(gemm_flops, unsharded) << "top_k " << top_k;
    // The home merge sums the G partials (G·home·hidden) and adds the residual; the gate-weighted
    // top-k sum runs there only for top-1 (for top-k it ran before the send, on every GPU).
    const double home = 32, h = static_cast<double>(model.hidden);
    double merge_flops = 0.0;
    for (const Task& t : bp.graph.tasks())
      if (t.kind == TaskKind::kCompute && t.phase == phase::kMerge && t.layer == first_moe_layer() && t.gpu == 0)
        for (const Op& op : bp.graph.ops_of(t)) merge_flops += op.flops;
    EXPECT_DOUBLE_EQ(merge_flops, 4 * home * h + home * h + (top_k == 1 ? 2 * home * h : 0.0)) << "top_k " << top_k;
  }
}

// §3.1 step 3: every token goes to every GPU, once whatever top_k; a GPU receives all tokens
// but its own. Uneven home blocks (16/32/16/32 tokens) make the check per GPU. Step 5 returns
// the same volume, each GPU receiving G-1 partials of each of its home tokens.
TEST_F(MoeShardPlan, ScatterSendsEveryTokenToEveryOtherGpuOnce) {
  wl = PrefillWorkload{6, 16, 1};
  const std::vector<double> home{16, 32, 16, 32};
  const double tb = token_bytes(model);
  for (int top_k : {1, 2}) {
    model.top_k = top_k;
    auto policy = make_moeshard(true);
    const LayerRouting r = top_k == 1 ? fixed_routing({90, 1, 1, 1, 1, 1, 0, 1}) : top2_skewed(96, 8);
    const BatchPlan bp = plan_with(*policy, ctx, r);
    const auto scatter = bytes_into(bp.graph, cluster, phase::kDispatch, first_moe_layer());
    const auto gather = bytes_into(bp.graph, cluster, phase::kCombine, first_moe_layer());
    for (int g = 0; g < 4; ++g) {
      EXPECT_DOUBLE_EQ(scatter[g], (96 - home[g]) * tb) << "GPU " << g;
      EXPECT_DOUBLE_EQ(gather[g], 3 * home[g] * tb) << "GPU " << g;
    }
  }
  // Even blocks: each GPU receives (G-1)/G of all tokens' hidden states.
  wl = PrefillWorkload{8, 16, 1};
  model.top_k = 1;
  auto policy = make_moeshard(true);
  const auto scatter = bytes_into(plan_with(*policy, ctx, fixed_routing({128, 0, 0, 0, 0, 0, 0, 0})).graph, cluster,
                                  phase::kDispatch, first_moe_layer());
  for (double b : scatter) EXPECT_DOUBLE_EQ(b, 0.75 * 128 * tb);
}

// §3.3: without the grouped kernel each expert slice runs its own kernels (E times as many).
TEST_F(MoeShardPlan, UnfusedRunsOneKernelSetPerExpertSlice) {
  const LayerRouting r = fixed_routing({30, 20, 20, 10, 10, 10, 10, 18});
  auto fused = make_moeshard(true);
  auto unfused = make_moeshard(false);
  const auto f = ops_of_phase(plan_with(*fused, ctx, r).graph, phase::kExperts, first_moe_layer(), 4);
  const auto u = ops_of_phase(plan_with(*unfused, ctx, r).graph, phase::kExperts, first_moe_layer(), 4);
  for (int g = 0; g < 4; ++g) {
    ASSERT_FALSE(f[g].empty());
    EXPECT_EQ(u[g].size(), static_cast<std::size_t>(model.experts) * f[g].size());
    const auto flops = [](const std::vector<Op>& ops) {
      double s = 0.0;
      for (const Op& op : ops) s += op.flops;
      return s;
    };
    EXPECT_DOUBLE_EQ(flops(u[g]), flops(f[g]));
  }
}

namespace {

// MoEShard §4 set-up, reduced to 4 layers (2 MoE layers) and one batch to stay fast: Switch-Base
// on 4x A100 with NVLink, seq_len 120, the §4 router; DeepSpeed is static-ep with the contiguous
// placement, dropless here (the paper's CF of min(E, 50) is meant to drop as little as possible).
const char* kSetup = R"(name: moeshard-setup
seed: 11
model: {preset: switch-base-128, layers: 4}
hardware: hgx-a100-4gpu-nvlink
workload: {batch_size: 100, seq_len: 120, batches: 1, routing: {kind: moeshard, alpha_r: 0.6, k_r_fraction: 0.1}}
policy:
  - {name: static-ep, label: deepspeed, placement: contiguous, capacity_factor: 0}
  - {name: moeshard, label: moeshard}
  - {name: moeshard, label: unfused, fused: false}
)";

/// Mean MoE layer latency (ms) of each run, by label.
std::map<std::string, double> layer_ms(const std::vector<std::string>& overrides) {
  const auto r = run_scenario(load_scenario_text(kSetup, "test.yaml", overrides));
  std::map<std::string, double> out;
  for (const auto& run : r["runs"]) {
    out[run["label"].get<std::string>()] = run["metrics"]["layer_latency_ms"]["mean"].get<double>();
    EXPECT_EQ(run["metrics"]["tokens_dropped"].get<long long>(), 0) << run["label"];
    if (run["policy"] == "moeshard") {
      EXPECT_DOUBLE_EQ(run["metrics"]["load"]["gpu_max_over_mean"].get<double>(), 1.0);
    }
  }
  return out;
}

}  // namespace

// Fig. 3b's direction: the speedup over DeepSpeed grows with the batch. In the simulator it grows
// while the expert GEMMs go from weight-streaming to compute-bound and then levels off at the
// hot GPU's share of the work (the routing's skew does not change with the batch), so the test
// asks for growth from 10 to 100 and no loss after beyond 2% (wave quantisation makes the
// expert GEMMs' time step with their tile count: 2.498 at 100, 2.469 at 450).
TEST(MoeShardScenario, SpeedupOverStaticEpGrowsWithBatchSize) {
  std::vector<double> speedup;
  for (const char* b : {"10", "100", "450"}) {
    const auto ms = layer_ms({std::string("workload.batch_size=") + b});
    speedup.push_back(ms.at("deepspeed") / ms.at("moeshard"));
  }
  EXPECT_GT(speedup[1], speedup[0] * 1.05);
  EXPECT_GE(speedup[2], speedup[1] * 0.98);
  EXPECT_GT(speedup[2], 1.0);
}

// §4.4: per-slice kernels pay a launch each, so the grouped kernel wins by more as experts grow.
TEST(MoeShardScenario, UnfusedIsSlowerAndLosesMoreWithMoreExperts) {
  const auto few = layer_ms({"model.experts=8"});
  const auto many = layer_ms({});
  EXPECT_GT(many.at("unfused"), many.at("moeshard"));
  EXPECT_GT(many.at("unfused") / many.at("moeshard"), few.at("unfused") / few.at("moeshard"));
}

}  // namespace moesim
