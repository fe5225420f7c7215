// Count-level routing (issue 13): a policy that accepts counts gives exactly the same plan and
// timings from selections per (source GPU, expert) as from the token-level routing they
// summarise — whatever the order-dependent rules (capacity drops, home-first quotas).
#include <gtest/gtest.h>

#include "serving/batch_planner.hpp"
#include "tests/support/policy_fixtures.hpp"

namespace moesim {
namespace {

using testing_support::execute_plan;
using testing_support::full_mesh;
using testing_support::make_policy;

/// The count-level form of a token-level routing whose token t lives on token_home[t].
LayerRouting to_counts(const LayerRouting& r, const std::vector<int>& token_home, int gpus) {
  LayerRouting c;
  c.num_tokens = r.num_tokens;
  c.top_k = r.top_k;
  c.num_experts = r.num_experts;
  c.by_count = true;
  c.sources = gpus;
  c.counts.assign(static_cast<std::size_t>(gpus) * static_cast<std::size_t>(r.num_experts), 0);
  for (std::int64_t t = 0; t < r.num_tokens; ++t)
    for (int s = 0; s < r.top_k; ++s)
      ++c.counts[static_cast<std::size_t>(token_home[static_cast<std::size_t>(t)]) * static_cast<std::size_t>(r.num_experts) +
                 static_cast<std::size_t>(r.expert(t, s))];
  return c;
}

struct Case {
  std::string name;
  std::string options;  ///< YAML mapping
};

}  // namespace

TEST(CountLevelRouting, EveryPolicyThatAcceptsCountsPlansAndTimesExactlyAsFromTokens) {
  ModelSpec m = model_presets().get("mixtral-8x7b").value;
  m.layers = 2;
  const Cluster cluster(full_mesh(1, 4));
  PrefillWorkload w;
  w.batch_size = 8;
  w.seq_len = 64;
  const PolicyContext ctx{m, cluster, w};
  std::vector<int> token_home;
  for (int g = 0; g < 4; ++g) token_home.insert(token_home.end(), 128, g);
  // Skewed top-2 over 8 experts: expert 0 and 1 hot.
  const std::vector<double> p = {0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05};
  Rng rng(7);
  const LayerRouting tokens = systematic_sample(inclusion_probabilities(p, 2), 2, 512, rng);
  const LayerRouting counts = to_counts(tokens, token_home, 4);

  std::vector<Case> cases = {{"static-ep", "{capacity_factor: 1.0}"},
                             {"static-ep", "{placement: round-robin}"},
                             {"deepspeed", "{drop_tokens: true, capacity_factor: 1.0}"}};
  for (const auto& name : policies().names())
    if (policies().get(name).value.supports.stepped) cases.push_back({name, "{}"});
  int checked = 0;
  for (const Case& c : cases) {
    auto a = make_policy(c.name, YAML::Load(c.options));
    if (!a->accepts_counts()) continue;
    auto b = make_policy(c.name, YAML::Load(c.options));
    a->setup(ctx);
    b->setup(ctx);
    const std::vector<LayerRouting> by_token(2, tokens), by_count(2, counts);
    const BatchPlan pa = plan_batch(*a, ctx, 0, by_token);
    const BatchPlan pb = plan_batch(*b, ctx, 0, by_count);
    ASSERT_EQ(pa.graph.size(), pb.graph.size()) << c.name << " " << c.options;
    for (std::size_t l = 0; l < pa.moe.size(); ++l) {
      EXPECT_EQ(pa.moe[l].gpu_tokens, pb.moe[l].gpu_tokens) << c.name << " " << c.options;
      EXPECT_EQ(pa.moe[l].tokens_dropped, pb.moe[l].tokens_dropped) << c.name << " " << c.options;
    }
    const auto ta = execute_plan(pa.graph, cluster), tb = execute_plan(pb.graph, cluster);
    for (TaskId i = 0; i < pa.graph.size(); ++i) {
      EXPECT_EQ(ta[i].start, tb[i].start) << c.name << " " << c.options << " task " << i;
      EXPECT_EQ(ta[i].end, tb[i].end) << c.name << " " << c.options << " task " << i;
    }
    ++checked;
  }
  // static-ep three times, deepspeed twice, fastmoe, harmoeny, fastermoe, even-split, eplb, exflow,
  // moeshard, tp-experts.
  EXPECT_GE(checked, 13);
}

TEST(CountLevelRouting, PoliciesThatLookAtTokensSayso) {
  EXPECT_FALSE(make_policy("moegps-dup", YAML::Load("{}"))->accepts_counts());
  EXPECT_FALSE(make_policy("exflow", YAML::Load("{resolve_every: 2}"))->accepts_counts());
  EXPECT_TRUE(make_policy("exflow", YAML::Load("{}"))->accepts_counts());
}

}  // namespace moesim
