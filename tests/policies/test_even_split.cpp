// even-split (HarMoEny §V-C2): token conservation, per-expert quotas within one across GPUs,
// home-first locality, resident weights when memory allows, streamed weights (async host fetches
// into reused buffers) when it does not, the at-least-two-buffers input check, and Qwen streaming
// at scenario level.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "models/model_spec.hpp"
#include "models/operators.hpp"
#include "serving/batch_planner.hpp"
#include "policies/memory.hpp"
#include "tests/support/policy_fixtures.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

using testing_support::fixed_routing;
using testing_support::make_policy;

std::unique_ptr<Policy> make_even(const std::string& weights) {
  YAML::Node opts;
  opts["weights"] = weights;
  return make_policy("even-split", opts);
}

/// What a resident plan shows of one MoE layer: per GPU the selections of each expert with any
/// (the grouped GEMM's groups, in expert order) and the token matrix sent over the scatter.
struct LayerView {
  std::vector<std::vector<std::int64_t>> groups;
  std::vector<std::vector<double>> sent;
};

LayerView view(const BatchPlan& bp, const ModelSpec& m, int layer, int gpus) {
  LayerView v{std::vector<std::vector<std::int64_t>>(gpus), std::vector<std::vector<double>>(gpus, std::vector<double>(gpus, 0.0))};
  for (const Task& t : bp.graph.tasks()) {
    if (t.layer != layer) continue;
    if (t.kind == TaskKind::kCompute && t.phase == phase::kExperts) v.groups[t.gpu] = bp.graph.ops_of(t)[0].group_m;
    if (t.kind == TaskKind::kTransfer && t.phase == phase::kDispatch) v.sent[t.src][t.dst] += t.bytes / token_bytes(m);
  }
  return v;
}

}  // namespace

class EvenSplitPlan : public ::testing::Test {
 protected:
  ModelSpec model = model_presets().get("switch-base-8").value;
  ClusterSpec spec = testing_support::full_mesh(1, 4);
  PrefillWorkload wl{8, 16, 1};  // 128 tokens, 32 homed on each GPU in token order

  std::vector<LayerRouting> same_every_layer(const std::vector<std::int64_t>& counts) const {
    return std::vector<LayerRouting>(model.num_moe_layers(), fixed_routing(counts));
  }
};

TEST_F(EvenSplitPlan, QuotasWithinOneAndTokensConserved) {
  const Cluster cluster(spec);
  const PolicyContext ctx{model, cluster, wl};
  auto policy = make_even("auto");
  policy->setup(ctx);
  // Uneven remainders: every expert's split and every GPU's total differ by at most one.
  const std::vector<std::int64_t> counts{33, 31, 17, 15, 9, 7, 9, 7};
  const BatchPlan bp = plan_batch(*policy, ctx, 0, same_every_layer(counts));
  for (const auto& moe : bp.moe) {
    EXPECT_EQ(moe.tokens_dropped, 0);
    EXPECT_EQ(std::accumulate(moe.gpu_tokens.begin(), moe.gpu_tokens.end(), std::int64_t{0}), 128);
    const auto [lo, hi] = std::minmax_element(moe.gpu_tokens.begin(), moe.gpu_tokens.end());
    EXPECT_LE(*hi - *lo, 1);
  }
  const LayerView v = view(bp, model, 1, 4);
  for (int e = 0; e < 8; ++e) {
    std::int64_t sum = 0, lo = counts[e], hi = 0;
    for (int g = 0; g < 4; ++g) {
      ASSERT_EQ(v.groups[g].size(), 8u) << "every GPU computes every expert";
      sum += v.groups[g][e];
      lo = std::min(lo, v.groups[g][e]);
      hi = std::max(hi, v.groups[g][e]);
    }
    EXPECT_EQ(sum, counts[e]) << "expert " << e;
    EXPECT_LE(hi - lo, 1) << "expert " << e;
  }
}

TEST_F(EvenSplitPlan, HomeGpuKeepsItsQuota) {
  const Cluster cluster(spec);
  const PolicyContext ctx{model, cluster, wl};
  auto policy = make_even("auto");
  policy->setup(ctx);
  // 16 selections per expert, so each GPU's quota is 4. Homes: tokens 0-31 on GPU 0, 32-63 on 1,
  // 64-95 on 2, 96-127 on 3. Experts 1-5 and 7 draw from one home; expert 0 from homes 2 (4) and
  // 3 (12), expert 6 from homes 2 (12) and 3 (4). Home first keeps min(home selections, quota)
  // on each GPU: 4 per expert and home GPU, 40 in all. Filling quotas in token order instead would
  // send expert 0's home-2 selections to GPU 0 and keep only 36.
  auto expert_of = [](int t) {
    if (t >= 92 && t < 108) return 0;
    if (t >= 80 && t < 112) return 6;
    return t < 80 ? 1 + t / 16 : 7;
  };
  LayerRouting r;
  r.num_experts = 8;
  r.num_tokens = 128;
  for (int t = 0; t < 128; ++t) r.experts.push_back(expert_of(t));
  ASSERT_EQ(r.expert_counts(), std::vector<std::int64_t>(8, 16));
  const BatchPlan bp = plan_batch(*policy, ctx, 0, std::vector<LayerRouting>(model.num_moe_layers(), r));
  const LayerView v = view(bp, model, 1, 4);
  const std::vector<double> kept{8, 8, 12, 12};  // GPU 2: experts 0, 5, 6; GPU 3: experts 0, 6, 7
  for (int s = 0; s < 4; ++s) {
    const double out = std::accumulate(v.sent[s].begin(), v.sent[s].end(), 0.0);
    EXPECT_DOUBLE_EQ(out, 32.0 - kept[s]) << "GPU " << s;
  }
}

TEST_F(EvenSplitPlan, ResidentWhenAllExpertsFit) {
  // HarMoEny's Switch-128 in fp32 on a 32 GB V100: 128 x 6 experts of 18.9 MB fit on every GPU.
  const ModelSpec sw = model_presets().get("switch-base-128").value;
  const Cluster dgx1(cluster_presets().get("dgx1-v100").value);
  const PrefillWorkload w{64, 128, 1};
  const PolicyContext ctx{sw, dgx1, w};
  auto policy = make_even("auto");
  policy->setup(ctx);
  for (const double b : policy->expert_memory_bytes(ctx))
    EXPECT_DOUBLE_EQ(b, sw.expert_bytes() * 128 * sw.num_moe_layers());
  for (const double free : memory_headroom(*policy, ctx)) EXPECT_GE(free, 0.0);
  std::vector<std::int64_t> counts(128, 64);
  const BatchPlan bp = plan_batch(*policy, ctx, 0, std::vector<LayerRouting>(sw.num_moe_layers(), fixed_routing(counts)));
  for (const Task& t : bp.graph.tasks()) EXPECT_NE(t.phase, phase::kFetch);
}

TEST_F(EvenSplitPlan, StreamsThroughBuffersWhenMemoryIsShort) {
  // Size GPU memory to what all experts need, less all but 3.5 experts: 3 buffers fit.
  const double eb = model.expert_bytes();
  const double all_experts = eb * model.experts * model.num_moe_layers();
  double needed = 0.0;
  {
    const Cluster cluster(spec);
    const PolicyContext ctx{model, cluster, wl};
    auto resident = make_even("resident");
    resident->setup(ctx);
    const std::vector<double> free = memory_headroom(*resident, ctx);
    needed = spec.gpu.memory_bytes - *std::min_element(free.begin(), free.end());
  }
  spec.gpu.memory_bytes = needed - all_experts + 3.5 * eb;
  const Cluster cluster(spec);
  const PolicyContext ctx{model, cluster, wl};
  auto policy = make_even("auto");
  policy->setup(ctx);
  for (const double b : policy->expert_memory_bytes(ctx)) EXPECT_DOUBLE_EQ(b, 3 * eb);
  const BatchPlan bp = plan_batch(*policy, ctx, 0, same_every_layer({40, 30, 20, 10, 8, 8, 8, 4}));
  // Every GPU fetches each of the 8 experts it has selections for, in every MoE layer, from host
  // memory on its host-to-device copy engine.
  std::vector<int> fetches(4, 0);
  for (const Task& t : bp.graph.tasks()) {
    if (t.phase != phase::kFetch) continue;
    ASSERT_EQ(t.kind, TaskKind::kTransfer);
    EXPECT_EQ(t.engine, CopyEngine::kHostToDevice);
    EXPECT_EQ(t.src, cluster.host_endpoint(0));
    EXPECT_EQ(t.dst, t.gpu);
    EXPECT_DOUBLE_EQ(t.bytes, eb);
    ++fetches[t.gpu];
  }
  for (int g = 0; g < 4; ++g) EXPECT_EQ(fetches[g], 8 * model.num_moe_layers()) << "GPU " << g;
  for (const auto& moe : bp.moe)
    EXPECT_EQ(std::accumulate(moe.gpu_tokens.begin(), moe.gpu_tokens.end(), std::int64_t{0}), 128);

  // Less than two buffers' worth is an input error naming the problem.
  spec.gpu.memory_bytes = needed - all_experts + 1.5 * eb;
  const Cluster tight(spec);
  const PolicyContext tctx{model, tight, wl};
  auto starved = make_even("auto");
  try {
    starved->setup(tctx);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("at least 2 expert buffers"), std::string::npos) << e.what();
  }
}

// HarMoEny's Qwen (fp32, 33 MB per expert: 60 x 24 experts do not fit on a 32 GB V100) streams
// its experts; Switch-128 stays resident. Both split every expert's tokens exactly evenly.
TEST(EvenSplitScenario, QwenStreamsSwitchStaysResident) {
  const char* text = R"(name: even-split
seed: 3
model: {preset: qwen1.5-moe-a2.7b, dtype: fp32}
hardware: {preset: dgx1-v100}
workload: {batch_size: 16, seq_len: 128, batches: 1, routing: {kind: skewed, alpha: 0.9, hot_experts: 10}}
policy: [even-split, {name: static-ep, label: static}]
)";
  const auto q = run_scenario(load_scenario_text(text, "q.yaml"));
  const auto& even = q["runs"][0]["metrics"];
  EXPECT_GT(even["bytes"]["host_to_device"].get<double>(), 0.0);
  EXPECT_LT(even["load"]["gpu_max_over_mean"].get<double>(), 1.01);
  EXPECT_LE(even["memory_peak_bytes"]["max"].get<double>(), 32e9);
  EXPECT_EQ(q["runs"][1]["metrics"]["bytes"]["host_to_device"].get<double>(), 0.0);
  // A GPU too small for even two expert buffers beside the rest is an error at the policy entry.
  try {
    run_scenario(load_scenario_text(text, "q.yaml", {"hardware.gpu.memory_GB=3.5"}));
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("at least 2 expert buffers"), std::string::npos) << e.what();
  }

  const auto s = run_scenario(load_scenario_text(text, "s.yaml", {"model.preset=switch-base-128"}));
  EXPECT_EQ(s["runs"][0]["metrics"]["bytes"]["host_to_device"].get<double>(), 0.0);
  EXPECT_LT(s["runs"][0]["metrics"]["load"]["gpu_max_over_mean"].get<double>(), 1.01);
}

}  // namespace moesim
