// fastmoe: static expert parallelism as FastMoE runs it (HarMoEny §V-A): the same selections and
// bytes as static-ep, no drops, but one kernel group per expert with tokens instead of one grouped
// GEMM, and a count exchange before the scatter.
#include <gtest/gtest.h>

#include <numeric>

#include "models/model_spec.hpp"
#include "tests/support/policy_fixtures.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

using testing_support::fixed_routing;
using testing_support::full_mesh;
using testing_support::make_policy;
using testing_support::mixed_routing;
using testing_support::phase_bytes;
using testing_support::plan_with;

struct Case {
  const char* name;
  const char* placement;
  std::vector<std::int64_t> counts;
};

class FastMoeAgainstStaticEp : public ::testing::TestWithParam<Case> {};

TEST_P(FastMoeAgainstStaticEp, SameBytesDroplessOneKernelPerExpert) {
  const Case& c = GetParam();
  const ModelSpec model = model_presets().get("switch-base-8").value;
  const Cluster cluster(full_mesh(1, 4));
  const PrefillWorkload wl{8, 16, 1};
  const PolicyContext ctx{model, cluster, wl};
  const LayerRouting r = mixed_routing(c.counts, 5);
  YAML::Node opts;
  opts["placement"] = c.placement;
  auto fast = make_policy("fastmoe", opts);
  auto stat = make_policy("static-ep", opts);
  const BatchPlan f = plan_with(*fast, ctx, r);
  const BatchPlan s = plan_with(*stat, ctx, r);

  const std::int64_t selections = std::accumulate(c.counts.begin(), c.counts.end(), std::int64_t{0});
  ASSERT_EQ(f.moe.size(), s.moe.size());
  for (std::size_t l = 0; l < f.moe.size(); ++l) {
    EXPECT_EQ(f.moe[l].tokens_dropped, 0);
    EXPECT_EQ(std::accumulate(f.moe[l].gpu_tokens.begin(), f.moe[l].gpu_tokens.end(), std::int64_t{0}), selections);
    EXPECT_EQ(f.moe[l].gpu_tokens, s.moe[l].gpu_tokens);
  }
  EXPECT_DOUBLE_EQ(phase_bytes(f.graph, phase::kDispatch), phase_bytes(s.graph, phase::kDispatch));
  EXPECT_DOUBLE_EQ(phase_bytes(f.graph, phase::kCombine), phase_bytes(s.graph, phase::kCombine));

  // One expert task per expert with tokens, each a single-group GEMM; the same FLOPs in all.
  const int experts_with_tokens =
      static_cast<int>(std::count_if(c.counts.begin(), c.counts.end(), [](std::int64_t n) { return n > 0; }));
  auto expert_tasks = [](const BatchPlan& bp, double& flops) {
    int tasks = 0;
    for (const Task& t : bp.graph.tasks()) {
      if (t.kind != TaskKind::kCompute || t.phase != phase::kExperts) continue;
      ++tasks;
      for (const Op& op : bp.graph.ops_of(t)) flops += op.flops;
    }
    return tasks;
  };
  double ff = 0.0, sf = 0.0;
  EXPECT_EQ(expert_tasks(f, ff), model.num_moe_layers() * experts_with_tokens);
  expert_tasks(s, sf);
  EXPECT_DOUBLE_EQ(ff, sf);
  for (const Task& t : f.graph.tasks())
    if (t.kind == TaskKind::kCompute && t.phase == phase::kExperts)
      for (const Op& op : f.graph.ops_of(t))
        if (op.kind == OpKind::kGroupedGemm) {
          EXPECT_EQ(op.group_m.size(), 1u);
        }

  // count_by_gate's exchange: each GPU sends every other one 8 bytes per expert it holds.
  EXPECT_DOUBLE_EQ(phase_bytes(f.graph, phase::kCollective), model.num_moe_layers() * 4.0 * 3.0 * 8.0 * 2.0);

  // Split kernels never beat the grouped one: each pays its own launch and its own weight read.
  const auto tf = testing_support::execute_plan(f.graph, cluster);
  const auto ts = testing_support::execute_plan(s.graph, cluster);
  const auto bf = testing_support::expert_busy(f.graph, tf, 4), bs = testing_support::expert_busy(s.graph, ts, 4);
  for (int g = 0; g < 4; ++g) EXPECT_GE(bf[g], bs[g]) << "GPU " << g;
}

INSTANTIATE_TEST_SUITE_P(
    Routings, FastMoeAgainstStaticEp,
    ::testing::Values(Case{"skewed_contiguous", "contiguous", {40, 30, 20, 10, 8, 8, 8, 4}},
                      Case{"skewed_round_robin", "round-robin", {40, 30, 20, 10, 8, 8, 8, 4}},
                      Case{"idle_experts", "contiguous", {64, 0, 0, 32, 0, 0, 32, 0}},
                      Case{"uniform", "round-robin", {16, 16, 16, 16, 16, 16, 16, 16}}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace moesim
