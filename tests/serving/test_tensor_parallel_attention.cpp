// Tensor-parallel attention (MoE-GPS §2: attention TP over every GPU, a ring all-reduce after it,
// then an even share of the tokens per GPU for the MoE layer): per-GPU ops are 1/G of the heads
// over every sequence, the collectives move what the ring formulas say, the tokens are shared
// evenly, and a scenario whose heads do not split over its GPUs is refused at the key.
#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include "app/scenario/scenario.hpp"
#include "core/diagnostics.hpp"
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

/// Switch-base-8 (12 heads, a MoE layer every other layer) on a 4-GPU mesh, 6 x 16 tokens: data
/// parallel gives the GPUs 1, 2, 1, 2 sequences.
class TensorParallelAttention : public ::testing::Test {
 protected:
  ModelSpec model = model_presets().get("switch-base-8").value;
  Cluster cluster{testing_support::full_mesh(1, 4, 100.0)};
  PrefillWorkload wl{6, 16, 1};
  PolicyContext ctx{model, cluster, wl};
  LayerRouting routing = fixed_routing({40, 20, 10, 10, 5, 5, 3, 3});  // 96 selections (top-1)

  BatchPlan plan(bool tensor) {
    wl.tensor_parallel_attention = tensor;
    auto p = testing_support::make_policy("static-ep", YAML::Node());
    return plan_with(*p, ctx, routing);
  }
  static double flops_of(const std::vector<Op>& ops, const std::string& name) {
    double f = 0.0;
    for (const Op& op : ops)
      if (name == op.name) f += op.flops;
    return f;
  }
};

}  // namespace

TEST_F(TensorParallelAttention, EachGpuRunsAQuarterOfTheHeadsOverEverySequence) {
  const auto dp = ops_of_phase(plan(false).graph, phase::kAttention, 0, 4);
  const auto tp = ops_of_phase(plan(true).graph, phase::kAttention, 0, 4);
  for (const std::string name : {"attn.qkv", "attn.core", "attn.out"}) {
    double dp_total = 0.0;
    for (const auto& ops : dp) dp_total += flops_of(ops, name);
    ASSERT_GT(dp_total, 0.0) << name;
    for (int g = 0; g < 4; ++g) EXPECT_NEAR(flops_of(tp[g], name), dp_total / 4, 1e-9 * dp_total) << name << " GPU " << g;
  }
}

// Ring all-reduce of B = T x token bytes: each GPU receives 2(G-1)/G B, in every layer. From the
// second layer on a ring all-gather of each GPU's share P = T/G x token bytes first: (G-1) P.
TEST_F(TensorParallelAttention, CollectivesMoveTheRingFormulasBytes) {
  const BatchPlan bp = plan(true);
  const double B = 96 * token_bytes(model);
  for (int g = 0; g < 4; ++g) {
    EXPECT_NEAR(bytes_into(bp.graph, cluster, phase::kCollective, 0)[g], 2.0 * 3 / 4 * B, 1e-6 * B) << g;
    EXPECT_NEAR(bytes_into(bp.graph, cluster, phase::kCollective, 1)[g], 2.0 * 3 / 4 * B + 3 * B / 4, 1e-6 * B) << g;
  }
  // Data-parallel attention moves nothing of the kind.
  const BatchPlan dp = plan(false);
  for (int g = 0; g < 4; ++g) EXPECT_EQ(bytes_into(dp.graph, cluster, phase::kCollective, 0)[g], 0.0);
}

TEST_F(TensorParallelAttention, TokensAreSharedEvenlyForTheMoeLayer) {
  const BatchPlan tp = plan(true);
  EXPECT_EQ(tp.home_tokens, (std::vector<std::int64_t>{24, 24, 24, 24}));
  const BatchPlan dp = plan(false);
  EXPECT_EQ(dp.home_tokens, (std::vector<std::int64_t>{16, 32, 16, 32}));
  for (const auto& moe : tp.moe)
    EXPECT_EQ(std::accumulate(moe.gpu_tokens.begin(), moe.gpu_tokens.end(), std::int64_t{0}), 96);
}

TEST(TensorParallelAttentionScenario, HeadsThatDoNotSplitOverTheGpusAreAnErrorAtTheKey) {
  const std::string text =
      "model: switch-base-8\n"
      "hardware: dgx1-v100\n"
      "workload: {kind: prefill, attention_parallelism: tensor}\n";
  try {
    load_scenario_text(text, "tp.yaml");
    ADD_FAILURE() << "12 heads over 8 GPUs were accepted";
  } catch (const InputError& e) {
    const std::string d = e.diagnostics().front().to_string();
    EXPECT_NE(d.find("tp.yaml:3:"), std::string::npos) << d;
    EXPECT_NE(d.find("12 heads do not divide by 8 GPUs"), std::string::npos) << d;
  }
  EXPECT_NO_THROW(load_scenario_text("model: switch-base-8\nhardware: hgx-a100-4gpu-nvlink\n"
                                     "workload: {kind: prefill, attention_parallelism: tensor}\n",
                                     "tp.yaml"));
}

}  // namespace moesim
