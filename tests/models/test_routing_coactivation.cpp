// The `coactivation` routing model: pairs of a token's experts fall within a group as often as
// `intra` says (and by chance at intra = 0), uniform shares stay uniform, first experts follow the
// target shares in every layer, `follow` chains a token's group across layers, routing is a
// function of the seed and the token, and impossible settings are InputErrors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "models/routing.hpp"
#include "tests/support/routing_fixtures.hpp"

namespace moesim {
namespace {

RoutingContext context(int experts, int top_k, std::uint64_t seed = 1) {
  return testing_support::routing_context(experts, top_k, seed);
}

// Reads options as a scenario does: declared-range problems are diagnostics, thrown here. Groups
// are contiguous expert ids unless the options say `layout` (the default is shuffled).
std::unique_ptr<RoutingModel> make(const std::string& yaml, const RoutingContext& ctx) {
  const auto& info = routing_models().get("coactivation").value;
  Diagnostics d;
  YAML::Node node = YAML::Load(yaml.empty() ? "{}" : yaml);
  if (!node["layout"]) node["layout"] = "contiguous";
  const ParamSet p = read_params(node, info.params, SourceMap("t.yaml"), d);
  if (!d.empty()) throw InputError(SourceLocation{}, d.to_string());
  return info.make(p, ctx, SourceLocation{"t.yaml", 1, 1});
}

// The runner's stream for (batch, layer).
LayerRouting route(const RoutingModel& m, int batch, int layer, std::int64_t tokens) {
  Rng rng = Rng::derive(1, Stream::kBatchRouting, static_cast<std::uint64_t>(batch), static_cast<std::uint64_t>(layer));
  return m.route(batch, layer, tokens, rng);
}

int group(int e, int groups, int experts) { return e * groups / experts; }

// Share of top-2 pairs (the co-activation matrix C[i][j] summed over i, j in one group).
double within_group_share(const LayerRouting& r, int groups) {
  std::vector<std::vector<std::int64_t>> c(static_cast<std::size_t>(r.num_experts),
                                           std::vector<std::int64_t>(static_cast<std::size_t>(r.num_experts), 0));
  for (std::int64_t t = 0; t < r.num_tokens; ++t) {
    ++c[static_cast<std::size_t>(r.expert(t, 0))][static_cast<std::size_t>(r.expert(t, 1))];
    ++c[static_cast<std::size_t>(r.expert(t, 1))][static_cast<std::size_t>(r.expert(t, 0))];
  }
  std::int64_t within = 0, all = 0;
  for (int i = 0; i < r.num_experts; ++i)
    for (int j = i + 1; j < r.num_experts; ++j) {
      all += c[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
      if (group(i, groups, r.num_experts) == group(j, groups, r.num_experts))
        within += c[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
    }
  return static_cast<double>(within) / static_cast<double>(all);
}

TEST(Coactivation, RegisteredTokenLevel) {
  const auto* e = routing_models().find("coactivation");
  ASSERT_NE(e, nullptr);
  EXPECT_FALSE(make("", context(16, 2))->supports_counts());
  const LayerRouting r = route(*make("", context(16, 2)), 0, 0, 1000);
  for (std::int64_t t = 0; t < r.num_tokens; ++t) EXPECT_NE(r.expert(t, 0), r.expert(t, 1));  // distinct
}

TEST(Coactivation, WithinGroupPairsFollowIntra) {
  // 16 experts, 4 groups of 4, top-2, uniform shares: a second expert drawn from all remaining
  // ones shares the first one's group with probability 3/15.
  const std::int64_t T = 20000;
  const double chance = 3.0 / 15.0;
  const double at_09 = within_group_share(route(*make("{intra: 0.9}", context(16, 2)), 0, 0, T), 4);
  EXPECT_NEAR(at_09, 0.9 + 0.1 * chance, 0.01);
  const double at_0 = within_group_share(route(*make("{intra: 0}", context(16, 2)), 0, 0, T), 4);
  EXPECT_NEAR(at_0, chance, 0.015);
}

TEST(Coactivation, IntraZeroMatchesIndependentDrawsWithZipfShares) {
  // Without co-activation the second expert is ∝ p over the experts other than the first, so
  // the within-group rate is Σ_e1 p_e1 · (P(group(e1)) − p_e1) / (1 − p_e1).
  const int E = 16, G = 4;
  std::vector<double> p(E);
  double sum = 0.0;
  for (int r = 0; r < E; ++r) sum += (p[static_cast<std::size_t>(r)] = 1.0 / (r + 1.0));
  for (double& v : p) v /= sum;
  std::vector<double> mass(G, 0.0);
  for (int e = 0; e < E; ++e) mass[static_cast<std::size_t>(group(e, G, E))] += p[static_cast<std::size_t>(e)];
  double expected = 0.0;
  for (int e = 0; e < E; ++e) {
    const double pe = p[static_cast<std::size_t>(e)];
    expected += pe * (mass[static_cast<std::size_t>(group(e, G, E))] - pe) / (1.0 - pe);
  }
  const auto m = make("{intra: 0, shares: zipf, zipf_s: 1}", context(E, 2));
  EXPECT_NEAR(within_group_share(route(*m, 0, 0, 40000), G), expected, 0.015);
}

TEST(Coactivation, UniformSharesStayUniform) {
  // Every expert is exchangeable with every other (equal groups), whatever intra and follow.
  const std::int64_t T = 100000;
  const auto m = make("{intra: 0.9, follow: 0.5}", context(16, 4));
  for (int layer : {0, 3}) {
    const auto c = route(*m, 0, layer, T).expert_counts();
    for (const auto n : c) EXPECT_NEAR(static_cast<double>(n) / (4.0 * T), 1.0 / 16, 0.003) << layer;
  }
}

TEST(Coactivation, FirstExpertsFollowTheTargetSharesInEveryLayer) {
  const std::int64_t T = 100000;
  const auto m = make("{shares: zipf, zipf_s: 1.2, intra: 0.8, follow: 0.7}", context(8, 2));
  Rng unused(0);
  const std::vector<double> p = m->distribution(0, 0, unused);
  for (int layer : {0, 3}) {
    const LayerRouting r = route(*m, 1, layer, T);
    std::vector<double> first(8, 0.0);
    for (std::int64_t t = 0; t < T; ++t) first[static_cast<std::size_t>(r.expert(t, 0))] += 1.0 / T;
    for (int e = 0; e < 8; ++e) {
      const double pe = p[static_cast<std::size_t>(e)];
      EXPECT_NEAR(first[static_cast<std::size_t>(e)], pe, 5.0 * std::sqrt(pe * (1 - pe) / T) + 1e-9) << layer << " " << e;
    }
  }
}

TEST(Coactivation, FollowChainsTheFirstExpertsGroupAcrossLayers) {
  const std::int64_t T = 20000;
  for (const double follow : {1.0, 0.0}) {
    const auto m = make("{follow: " + std::to_string(follow) + "}", context(16, 2));
    for (int l = 0; l + 1 < 4; ++l) {
      const LayerRouting a = route(*m, 2, l, T), b = route(*m, 2, l + 1, T);
      std::int64_t same = 0;
      for (std::int64_t t = 0; t < T; ++t) same += group(a.expert(t, 0), 4, 16) == group(b.expert(t, 0), 4, 16);
      if (follow == 1.0) {
        EXPECT_EQ(same, T) << l;
        EXPECT_NE(a.experts, b.experts);  // the same group, not the same experts
      } else {
        EXPECT_NEAR(static_cast<double>(same) / T, 0.25, 0.015) << l;  // Σ_g P(g)² by chance
      }
    }
  }
}

TEST(Coactivation, ServingTokensKeepTheirGroupAndRouting) {
  // route_tokens keys a token by (request, position): its group chains across layers, and its
  // experts do not depend on the other tokens of the step.
  const auto m = make("{follow: 1}", context(16, 2));
  std::vector<TokenRef> step;
  for (std::int64_t r = 0; r < 50; ++r)
    for (std::int64_t pos = 0; pos < 20; ++pos) step.push_back({r, pos});
  const std::vector<TokenRef> alone{step[123]};
  Rng rng(7);
  for (int l = 0; l + 1 < 4; ++l) {
    const LayerRouting a = m->route_tokens(0, l, step, rng), b = m->route_tokens(5, l + 1, step, rng);
    for (std::size_t t = 0; t < step.size(); ++t)
      EXPECT_EQ(group(a.experts[2 * t], 4, 16), group(b.experts[2 * t], 4, 16));
    const LayerRouting single = m->route_tokens(3, l, alone, rng);
    EXPECT_EQ(single.experts[0], a.experts[2 * 123]);
    EXPECT_EQ(single.experts[1], a.experts[2 * 123 + 1]);
  }
}

TEST(Coactivation, SameSeedSameRoutingDifferentSeedDifferent) {
  const std::string opts = "{intra: 0.7, follow: 0.5, shares: zipf}";
  const auto a = make(opts, context(32, 4, 5)), b = make(opts, context(32, 4, 5)), c = make(opts, context(32, 4, 6));
  EXPECT_EQ(route(*a, 1, 2, 5000).experts, route(*b, 1, 2, 5000).experts);
  EXPECT_NE(route(*a, 1, 2, 5000).experts, route(*c, 1, 2, 5000).experts);
  EXPECT_NE(route(*a, 1, 2, 5000).experts, route(*a, 2, 2, 5000).experts);  // another batch
}

TEST(Coactivation, ShuffledLayoutKeepsTheStructureButNotOnExpertIds) {
  // 64 experts, 8 groups, top-8, intra 0.9, zipf shares: the same model over positions, each
  // layer mapping positions to experts by its own permutation.
  const RoutingContext ctx = context(64, 8, 3);
  const auto shuffled = make("{groups: 8, intra: 0.9, shares: zipf, zipf_s: 1.0, layout: shuffled}", ctx);
  const auto contiguous = make("{groups: 8, intra: 0.9, shares: zipf, zipf_s: 1.0}", ctx);
  Rng rng(1);
  std::vector<double> p0 = shuffled->distribution(0, 0, rng), p1 = shuffled->distribution(0, 1, rng);
  const std::vector<double> pc = contiguous->distribution(0, 0, rng);
  EXPECT_NE(p0, pc);  // the hottest share is not expert 0's
  EXPECT_NE(p0, p1);  // and layers differ
  std::sort(p0.begin(), p0.end());
  std::vector<double> sorted = pc;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(p0, sorted);  // a permutation of the same shares
  // Pairs of one token that fall in one contiguous block of 8 ids: the contiguous layout's are
  // mostly same-group pairs; the shuffled layout's are at chance (1/8 of distinct pairs, minus
  // the pair's own slot: 7/63).
  const auto block_share = [](const LayerRouting& r) {
    double same = 0, pairs = 0;
    for (std::int64_t t = 0; t < r.num_tokens; ++t)
      for (int a = 0; a < r.top_k; ++a)
        for (int b = a + 1; b < r.top_k; ++b) {
          pairs += 1;
          same += r.expert(t, a) / 8 == r.expert(t, b) / 8;
        }
    return same / pairs;
  };
  const LayerRouting rs = route(*shuffled, 0, 1, 4000), rc = route(*contiguous, 0, 1, 4000);
  EXPECT_GT(block_share(rc), 0.6);
  EXPECT_NEAR(block_share(rs), 7.0 / 63.0, 0.03);
}

TEST(Coactivation, BadOptionsAreInputErrors) {
  EXPECT_THROW(make("{groups: 17}", context(16, 2)), InputError);
  EXPECT_NO_THROW(make("{groups: 16}", context(16, 2)));
  EXPECT_NO_THROW(make("{groups: 3}", context(16, 2)));  // sizes 6, 5, 5
  EXPECT_THROW(make("{groups: 0}", context(16, 2)), InputError);
  EXPECT_THROW(make("{intra: 1.5}", context(16, 2)), InputError);
  EXPECT_THROW(make("{intra: -0.1}", context(16, 2)), InputError);
  EXPECT_THROW(make("{follow: 2}", context(16, 2)), InputError);
  EXPECT_THROW(make("{shares: normal}", context(16, 2)), InputError);
  EXPECT_THROW(make("{shares: skewness, skewness: 17}", context(16, 2)), InputError);
  try {
    make("{groups: 9}", context(8, 2));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.diagnostics().at(0).where.file, "t.yaml");
    EXPECT_NE(std::string(e.what()).find("groups"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moesim
