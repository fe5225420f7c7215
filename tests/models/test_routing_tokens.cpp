// The `token-conditioned` routing model: Zipf token ids that stay with a token through every layer,
// aggregate expert shares on MoE-GPS §2's target skewness whatever the affinity, tokens of one id
// agreeing as often as `affinity` says, position structure, determinism and input checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "models/routing.hpp"

namespace moesim {
namespace {

RoutingContext context(int experts, int top_k, std::uint64_t seed = 1, std::int64_t seq_len = 512) {
  RoutingContext c;
  c.experts = experts;
  c.top_k = top_k;
  c.moe_layers = 2;
  c.batches = 4;
  c.model_name = "test";
  c.seed = seed;
  c.seq_len = seq_len;
  return c;
}

std::unique_ptr<RoutingModel> make(const std::string& yaml, const RoutingContext& ctx) {
  const auto& info = routing_models().get("token-conditioned").value;
  Diagnostics d;
  const ParamSet p = read_params(YAML::Load(yaml.empty() ? "{}" : yaml), info.params, SourceMap("test.yaml"), d);
  EXPECT_TRUE(d.empty()) << d.to_string();
  return info.make(p, ctx, SourceLocation{"test.yaml", 1, 1});
}

// The runner's stream for (batch, layer).
LayerRouting route(const RoutingModel& m, int batch, int layer, std::int64_t tokens, std::uint64_t seed = 1) {
  Rng rng = Rng::derive(seed, Stream::kBatchRouting, static_cast<std::uint64_t>(batch), static_cast<std::uint64_t>(layer));
  return m.route(batch, layer, tokens, rng);
}

// MoE-GPS §2 shares with one hot expert (expert 0).
std::vector<double> target(int experts, double s) {
  std::vector<double> p(static_cast<std::size_t>(experts), (1.0 - s / experts) / (experts - 1.0));
  p[0] = s / experts;
  return p;
}

// Unordered set of token t's experts, as a sorted vector.
std::vector<std::int32_t> set_of(const LayerRouting& r, std::int64_t t) {
  std::vector<std::int32_t> s(r.experts.begin() + t * r.top_k, r.experts.begin() + (t + 1) * r.top_k);
  std::sort(s.begin(), s.end());
  return s;
}

// Per id among the `ids` most frequent ones: the share of its tokens that took its modal set.
std::vector<double> modal_agreement(const LayerRouting& r, int ids) {
  std::vector<std::map<std::vector<std::int32_t>, std::int64_t>> sets(static_cast<std::size_t>(ids));
  std::vector<std::int64_t> n(static_cast<std::size_t>(ids), 0);
  for (std::int64_t t = 0; t < r.num_tokens; ++t) {
    const auto id = r.token_ids[static_cast<std::size_t>(t)];
    if (id >= ids) continue;
    ++sets[static_cast<std::size_t>(id)][set_of(r, t)];
    ++n[static_cast<std::size_t>(id)];
  }
  std::vector<double> out;
  for (int i = 0; i < ids; ++i) {
    std::int64_t best = 0;
    for (const auto& [_, c] : sets[static_cast<std::size_t>(i)]) best = std::max(best, c);
    out.push_back(static_cast<double>(best) / static_cast<double>(n[static_cast<std::size_t>(i)]));
  }
  return out;
}

TEST(TokenConditioned, RegisteredWithDocumentedOptions) {
  const auto* e = routing_models().find("token-conditioned");
  ASSERT_NE(e, nullptr);
  EXPECT_FALSE(e->description.empty());
  std::vector<std::string> names;
  for (const auto& spec : e->value.params) {
    EXPECT_FALSE(spec.help.empty()) << spec.name;
    names.push_back(spec.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"vocab", "zipf_s", "skewness", "hot_expert", "affinity",
                                             "position_affinity"}));
  // Other models leave token ids empty (and so stay bit-identical to before).
  const auto& info = routing_models().get("skewness").value;
  Diagnostics d;
  const auto plain = info.make(read_params(YAML::Load("{}"), info.params, SourceMap("t"), d), context(8, 2), {});
  EXPECT_FALSE(route(*plain, 0, 0, 100).has_token_ids());
}

TEST(TokenConditioned, TokenIdsFollowZipfAndStayWithTheToken) {
  const auto m = make("{vocab: 1000, zipf_s: 1.1}", context(8, 2));
  const std::int64_t T = 200000;
  const LayerRouting l0 = route(*m, 0, 0, T), l1 = route(*m, 0, 1, T), other = route(*m, 1, 0, T);
  ASSERT_EQ(l0.token_ids.size(), static_cast<std::size_t>(T));
  EXPECT_EQ(l0.token_ids, l1.token_ids);     // a token keeps its id through every layer
  EXPECT_NE(l0.token_ids, other.token_ids);  // another batch has other tokens
  EXPECT_NE(l0.experts, l1.experts);         // but routes independently per layer
  std::vector<std::int64_t> count(1000, 0);
  for (const auto id : l0.token_ids) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, 1000);
    ++count[static_cast<std::size_t>(id)];
  }
  double h = 0;
  for (int r = 1; r <= 1000; ++r) h += std::pow(r, -1.1);
  for (int r : {0, 1, 9}) {
    const double p = std::pow(r + 1.0, -1.1) / h;
    EXPECT_NEAR(static_cast<double>(count[static_cast<std::size_t>(r)]) / T, p, 4 * std::sqrt(p * (1 - p) / T)) << r;
  }
}

// The preferred sets are built against the shares owed to each expert, so the aggregate stays on
// p for any affinity, although the head id alone carries 14% of the tokens. Independent draws miss
// by several percent; owing without the affordability rule by up to 0.018 (a = 1, s = 2): several
// seeds, so that a lucky one does not hide either.
TEST(TokenConditioned, AggregateSharesFollowTargetSkewness) {
  for (const double s : {1.4, 2.0}) {
    for (const double a : {0.0, 0.6, 1.0}) {
      const auto p = target(8, s);
      double worst = 0.0;
      for (std::uint64_t seed = 1; seed <= 6; ++seed) {
        const auto m =
            make("{skewness: " + std::to_string(s) + ", affinity: " + std::to_string(a) + "}", context(8, 2, seed));
        for (int layer = 0; layer < 2; ++layer) {
          std::vector<std::int64_t> counts(8, 0);
          std::int64_t selections = 0;
          for (int b = 0; b < 4; ++b) {
            const LayerRouting r = route(*m, b, layer, 50000, seed);
            const auto c = r.expert_counts();
            for (int e = 0; e < 8; ++e) counts[static_cast<std::size_t>(e)] += c[static_cast<std::size_t>(e)];
            selections += r.num_tokens * r.top_k;
          }
          for (int e = 0; e < 8; ++e)
            worst = std::max(worst, std::abs(static_cast<double>(counts[static_cast<std::size_t>(e)]) / selections - p[e]));
          EXPECT_NEAR(static_cast<double>(counts[0]) / selections * 8, s, 0.04) << s << " " << a << " " << seed;
        }
      }
      EXPECT_LT(worst, 0.005) << "skewness " << s << " affinity " << a;
    }
  }
}

// Top-1: a token of id i takes pref(i) with probability a, or draws pref(i) from p anyway, so the
// modal expert of a frequent id gets a + (1 − a)·p_pref of its tokens.
TEST(TokenConditioned, TokensOfOneIdAgreeWithProbabilityAffinity) {
  const auto p = target(8, 2.0);
  for (const double a : {0.3, 0.6}) {
    const auto m = make("{skewness: 2.0, affinity: " + std::to_string(a) + "}", context(8, 1));
    const LayerRouting r = route(*m, 0, 0, 400000);
    std::vector<std::vector<std::int64_t>> by_id(5, std::vector<std::int64_t>(8, 0));
    for (std::int64_t t = 0; t < r.num_tokens; ++t)
      if (r.token_ids[static_cast<std::size_t>(t)] < 5) ++by_id[static_cast<std::size_t>(r.token_ids[t])][r.experts[t]];
    for (int id = 0; id < 5; ++id) {
      const auto& c = by_id[static_cast<std::size_t>(id)];
      const auto mode = std::max_element(c.begin(), c.end()) - c.begin();
      const double n = static_cast<double>(std::accumulate(c.begin(), c.end(), std::int64_t{0}));
      const double expect = a + (1 - a) * p[static_cast<std::size_t>(mode)];
      EXPECT_NEAR(static_cast<double>(c[static_cast<std::size_t>(mode)]) / n, expect,
                  4 * std::sqrt(expect * (1 - expect) / n) + 1e-3)
          << "affinity " << a << " id " << id;
    }
  }
  // Top-2: the modal pair of a frequent id covers at least `affinity` of its tokens, and at most
  // that plus the chance a free draw hits the pair (below the hot expert's inclusion 0.5).
  const auto m2 = make("{skewness: 2.0, affinity: 0.6}", context(8, 2));
  for (const double agree : modal_agreement(route(*m2, 0, 0, 400000), 5)) {
    EXPECT_GT(agree, 0.6 - 0.02);
    EXPECT_LT(agree, 0.6 + 0.4 * 0.5);
  }
  // affinity 0: ids carry no routing information; the modal pair is only as common as p makes it.
  const auto m0 = make("{skewness: 2.0, affinity: 0}", context(8, 2));
  for (const double agree : modal_agreement(route(*m0, 0, 0, 400000), 5)) EXPECT_LT(agree, 0.25);
}

TEST(TokenConditioned, PositionAffinityTiesTokensAtOnePosition) {
  const std::int64_t L = 64;
  const auto m = make("{skewness: 1.4, affinity: 0, position_affinity: 0.5}", context(8, 1, 3, L));
  const auto p = target(8, 1.4);
  const LayerRouting r = route(*m, 0, 0, L * 4000, 3);
  std::vector<std::vector<std::int64_t>> by_pos(static_cast<std::size_t>(L), std::vector<std::int64_t>(8, 0));
  for (std::int64_t t = 0; t < r.num_tokens; ++t) ++by_pos[static_cast<std::size_t>(t % L)][r.experts[t]];
  double agree = 0.0, expect = 0.0;
  for (const auto& c : by_pos) {
    const auto mode = std::max_element(c.begin(), c.end()) - c.begin();
    agree += static_cast<double>(c[static_cast<std::size_t>(mode)]) / 4000.0 / L;
    expect += (0.5 + 0.5 * p[static_cast<std::size_t>(mode)]) / L;
  }
  EXPECT_NEAR(agree, expect, 0.01);
  // Shares still follow p.
  const auto c = r.expert_counts();
  for (int e = 0; e < 8; ++e) EXPECT_NEAR(static_cast<double>(c[e]) / r.num_tokens, p[e], 0.01) << e;
}

TEST(TokenConditioned, DeterministicBySeed) {
  const auto a = make("{position_affinity: 0.2}", context(8, 2, 7));
  const auto b = make("{position_affinity: 0.2}", context(8, 2, 7));
  const auto c = make("{position_affinity: 0.2}", context(8, 2, 8));
  const LayerRouting ra = route(*a, 2, 1, 5000, 7), rb = route(*b, 2, 1, 5000, 7), rc = route(*c, 2, 1, 5000, 8);
  EXPECT_EQ(ra.experts, rb.experts);
  EXPECT_EQ(ra.token_ids, rb.token_ids);
  EXPECT_EQ(ra.experts, route(*a, 2, 1, 5000, 7).experts);  // routing again does not move anything
  EXPECT_NE(ra.experts, rc.experts);
  EXPECT_NE(ra.token_ids, rc.token_ids);
  // Token ids and preferences come from the model's seed, not from the (batch, layer) stream.
  Rng s7 = Rng::derive(7, Stream::kBatchRouting, 2, 1);
  const LayerRouting same_stream = c->route(2, 1, 5000, s7);
  EXPECT_NE(same_stream.token_ids, ra.token_ids);
  EXPECT_NE(same_stream.experts, ra.experts);
}

TEST(TokenConditioned, RejectsImpossibleSettings) {
  const auto& info = routing_models().get("token-conditioned").value;
  const auto build = [&](const std::string& yaml, const RoutingContext& ctx) {
    Diagnostics d;
    const ParamSet p = read_params(YAML::Load(yaml), info.params, SourceMap("t.yaml"), d);
    if (!d.empty()) throw InputError(SourceLocation{}, d.to_string());
    return info.make(p, ctx, SourceLocation{"t.yaml", 1, 1});
  };
  EXPECT_THROW(build("{skewness: 4.5}", context(8, 2)), InputError);  // > E/k
  EXPECT_NO_THROW(build("{skewness: 4}", context(8, 2)));
  EXPECT_THROW(build("{hot_expert: 8}", context(8, 2)), InputError);
  EXPECT_THROW(build("{affinity: 0.7, position_affinity: 0.4}", context(8, 2)), InputError);
  EXPECT_THROW(build("{affinity: 0.2, position_affinity: 0.4}", context(8, 2, 1, 0)), InputError);  // no seq_len
  EXPECT_NO_THROW(build("{affinity: 0.6}", context(8, 2, 1, 0)));  // seq_len only matters for positions
  EXPECT_THROW(build("{affinity: 1.5}", context(8, 2)), InputError);
}

}  // namespace
}  // namespace moesim
