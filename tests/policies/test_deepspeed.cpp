// deepspeed: the dense dispatch tensor padded to the capacity C (HarMoEny §V-A, MoEShard §4.1).
// Every expected value is worked out here from DeepSpeed's rules — C = max(min_capacity,
// ceil(T/E · cf · k)) with drops, the largest per-GPU expert count without; every GPU sends C
// rows per expert; each expert runs over G · C rows — not read back from the policy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "app/run/runner.hpp"
#include "app/scenario/scenario.hpp"
#include "models/model_spec.hpp"
#include "models/operators.hpp"
#include "tests/support/policy_fixtures.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

using testing_support::fixed_routing;
using testing_support::full_mesh;
using testing_support::make_policy;
using testing_support::plan_with;

constexpr int kGpus = 4;
constexpr std::int64_t kTokensPerGpu = 32;  // 8 sequences of 16 tokens, 2 per GPU

/// Top-2 routing of 128 tokens: token t picks experts t mod 8 and (t + 1) mod 8, so every GPU
/// sends each expert 8 selections.
LayerRouting round_top2() {
  LayerRouting r;
  r.top_k = 2;
  r.num_experts = 8;
  r.num_tokens = kGpus * kTokensPerGpu;
  for (std::int64_t t = 0; t < r.num_tokens; ++t) {
    r.experts.push_back(static_cast<int>(t % 8));
    r.experts.push_back(static_cast<int>((t + 1) % 8));
  }
  return r;
}

struct Case {
  const char* name;
  const char* options;
  LayerRouting routing;
  /// C by DeepSpeed's rule, from the per-GPU counts; -1 = the largest count (dropless).
  std::function<std::int64_t(std::int64_t max_count)> capacity;
};

class DeepSpeedClosedForm : public ::testing::TestWithParam<int> {
 protected:
  static std::vector<Case> cases() {
    const LayerRouting skewed = fixed_routing({40, 30, 20, 10, 8, 8, 8, 4});
    auto drop = [](double cf, int k, std::int64_t min_c) {
      return [=](std::int64_t) {
        return std::max<std::int64_t>(min_c, static_cast<std::int64_t>(std::ceil(32.0 / 8.0 * cf * k)));
      };
    };
    auto largest = [](std::int64_t max_count) { return max_count; };
    return {
        {"default_cf1_min4", "{drop_tokens: true}", skewed, drop(1.0, 1, 4)},
        {"cf2", "{drop_tokens: true, capacity_factor: 2.0}", skewed, drop(2.0, 1, 4)},
        {"min_capacity_wins", "{drop_tokens: true, capacity_factor: 1.0, min_capacity: 10}", skewed, drop(1.0, 1, 10)},
        // MoEShard's cf = min(E, 50) with E = 8: C equals the local token count, nothing drops.
        {"moeshard_cf_E", "{drop_tokens: true, capacity_factor: 8}", skewed, drop(8.0, 1, 4)},
        {"dropless", "{}", skewed, largest},
        {"dropless_uniform", "{drop_tokens: false}", fixed_routing({16, 16, 16, 16, 16, 16, 16, 16}), largest},
        {"top2", "{drop_tokens: true, capacity_factor: 1.0}", round_top2(), drop(1.0, 2, 4)},
        {"top2_half", "{drop_tokens: true, capacity_factor: 0.5}", round_top2(), drop(0.5, 2, 4)},
    };
  }
};

TEST_P(DeepSpeedClosedForm, PaddedBytesFlopsAndDrops) {
  const Case c = cases()[static_cast<std::size_t>(GetParam())];
  SCOPED_TRACE(c.name);
  ModelSpec model = model_presets().get("switch-base-8").value;
  model.top_k = c.routing.top_k;
  const Cluster cluster(full_mesh(1, kGpus));
  const PrefillWorkload wl{8, 16, 1};
  const PolicyContext ctx{model, cluster, wl};
  const int E = model.experts, G = kGpus, per_gpu = E / G;

  // Per-GPU counts: token t lives on GPU t / 32.
  std::vector<std::vector<std::int64_t>> local(G, std::vector<std::int64_t>(E, 0));
  for (std::int64_t t = 0; t < c.routing.num_tokens; ++t)
    for (int s = 0; s < c.routing.top_k; ++s) ++local[t / kTokensPerGpu][c.routing.expert(t, s)];
  std::int64_t max_count = 0;
  for (const auto& row : local) max_count = std::max(max_count, *std::max_element(row.begin(), row.end()));
  const std::int64_t C = c.capacity(max_count);
  std::int64_t dropped = 0;
  for (const auto& row : local)
    for (const auto n : row) dropped += std::max<std::int64_t>(0, n - C);

  auto policy = make_policy("deepspeed", YAML::Load(c.options));
  const BatchPlan bp = plan_with(*policy, ctx, c.routing);
  const auto layers = static_cast<double>(model.num_moe_layers());
  const std::int64_t selections = c.routing.num_tokens * c.routing.top_k;
  for (const auto& moe : bp.moe) {
    EXPECT_EQ(moe.tokens_dropped, dropped);
    EXPECT_EQ(std::accumulate(moe.gpu_tokens.begin(), moe.gpu_tokens.end(), std::int64_t{0}), selections - dropped);
    // Each GPU's GEMMs run over its E/G experts' G · C rows, whatever the routing.
    EXPECT_EQ(moe.gpu_rows, std::vector<std::int64_t>(G, per_gpu * G * C));
  }

  // The scatter and the combine each move C rows per expert from every GPU to every other
  // expert owner: G · (E - E/G) · C rows of hidden state per layer and direction.
  const double tb = static_cast<double>(model.hidden) * dtype_bytes(model.dtype);
  const double moved = layers * G * (E - per_gpu) * static_cast<double>(C) * tb;
  EXPECT_DOUBLE_EQ(testing_support::phase_bytes(bp.graph, phase::kDispatch), moved);
  EXPECT_DOUBLE_EQ(testing_support::phase_bytes(bp.graph, phase::kCombine), moved);

  // Expert GEMMs: one kernel group per expert (E per layer), 2 · rows · hidden · ffn FLOPs for
  // each of the up and down projections over G · C rows.
  double gemm_flops = 0.0;
  int expert_tasks = 0;
  for (const Task& t : bp.graph.tasks()) {
    if (t.kind != TaskKind::kCompute || t.phase != phase::kExperts) continue;
    ++expert_tasks;
    for (const Op& op : bp.graph.ops_of(t)) {
      if (op.kind != OpKind::kGroupedGemm) continue;
      EXPECT_EQ(op.group_m, std::vector<std::int64_t>{G * C});
      gemm_flops += op.flops;
    }
  }
  EXPECT_EQ(expert_tasks, static_cast<int>(layers) * E);
  const double rows = static_cast<double>(G) * static_cast<double>(C);
  EXPECT_DOUBLE_EQ(gemm_flops, layers * E * 2.0 * (2.0 * rows * static_cast<double>(model.hidden) *
                                                   static_cast<double>(model.expert_ffn)));
}

INSTANTIATE_TEST_SUITE_P(Cases, DeepSpeedClosedForm, ::testing::Range(0, 8));

// The point of the padding (HarMoEny §V-B, MoEShard Fig. 3): without drops, the layer's cost
// follows E × the largest expert count, not the token count. Same 128 tokens, hot expert twice as
// hot: twice the bytes.
TEST(DeepSpeed, DroplessCostFollowsTheLargestCountNotTheTokens) {
  const ModelSpec model = model_presets().get("switch-base-8").value;
  const Cluster cluster(full_mesh(1, kGpus));
  const PrefillWorkload wl{8, 16, 1};
  const PolicyContext ctx{model, cluster, wl};
  auto bytes = [&](const LayerRouting& r) {
    auto policy = make_policy("deepspeed", YAML::Load("{}"));
    return testing_support::phase_bytes(plan_with(*policy, ctx, r).graph, phase::kDispatch);
  };
  // Token t on GPU t / 32: the largest per-GPU count is 16 in the first routing, 32 in the second.
  const double even = bytes(fixed_routing({16, 16, 16, 16, 16, 16, 16, 16}));
  const double hot = bytes(fixed_routing({32, 0, 32, 0, 32, 0, 32, 0}));
  EXPECT_DOUBLE_EQ(hot / even, 2.0);
  // static-ep moves only the selections that leave their GPU: less than the padded tensor.
  auto st = make_policy("static-ep", YAML::Load("{}"));
  EXPECT_LT(testing_support::phase_bytes(plan_with(*st, ctx, fixed_routing({32, 0, 32, 0, 32, 0, 32, 0})).graph,
                                         phase::kDispatch),
            hot);
}

// Without drops the GPUs agree on C by an all-reduce of one count; with drops each computes C
// from its own token count and nothing is exchanged.
TEST(DeepSpeed, OnlyDroplessCapacityIsAllReduced) {
  const ModelSpec model = model_presets().get("switch-base-8").value;
  const Cluster cluster(full_mesh(1, kGpus));
  const PrefillWorkload wl{8, 16, 1};
  const PolicyContext ctx{model, cluster, wl};
  const LayerRouting r = fixed_routing({40, 30, 20, 10, 8, 8, 8, 4});
  auto collective = [&](const char* opts) {
    auto policy = make_policy("deepspeed", YAML::Load(opts));
    return testing_support::phase_bytes(plan_with(*policy, ctx, r).graph, phase::kCollective);
  };
  EXPECT_GT(collective("{drop_tokens: false}"), 0.0);
  EXPECT_EQ(collective("{drop_tokens: true}"), 0.0);
}

// The padded tensor takes memory (MoEShard §4.1: raising the capacity factor further "leads to
// memory issues"): Switch-128 at 1024 x 128 tokens with 90% of them on one expert fits a 32 GB
// V100 as static-ep, but not as DeepSpeed's E x C rows (~470 k rows of fp32 per GPU and layer).
TEST(DeepSpeed, PaddedRowsCountAsActivationMemory) {
  const std::string text = R"(name: padded-memory
seed: 1
model: {preset: switch-base-128, layers: 2}
hardware: dgx1-v100
workload: {batch_size: 1024, seq_len: 128, batches: 1, routing: {kind: skewed, alpha: 0.9, hot_experts: 1}}
policy: )";
  EXPECT_NO_THROW(run_scenario(load_scenario_text(text + "static-ep\n", "mem.yaml")));
  try {
    run_scenario(load_scenario_text(text + "deepspeed\n", "mem.yaml"));
    ADD_FAILURE() << "deepspeed's padded tensor should not fit";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit in GPU memory"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moesim
