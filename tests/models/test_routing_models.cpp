// Each synthetic routing model hits its target statistics within sampling error, is seeded
// deterministically, and reports unreachable settings as InputErrors.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "models/routing.hpp"
#include "tests/support/routing_fixtures.hpp"

namespace moesim {
namespace {

RoutingContext context(int experts, int top_k, std::uint64_t seed = 1) {
  return testing_support::routing_context(experts, top_k, seed);
}

std::unique_ptr<RoutingModel> make(const std::string& kind, const std::string& yaml, const RoutingContext& ctx) {
  const auto& info = routing_models().get(kind).value;
  Diagnostics d;
  const ParamSet p = read_params(YAML::Load(yaml.empty() ? "{}" : yaml), info.params, SourceMap("test.yaml"), d);
  EXPECT_TRUE(d.empty()) << d.to_string();
  return info.make(p, ctx, SourceLocation{"test.yaml", 1, 1});
}

// Routes `tokens` tokens of (batch, layer) with the runner's stream and returns selection shares.
std::vector<double> shares(const RoutingModel& m, std::int64_t tokens, int batch = 0, int layer = 0,
                           std::uint64_t seed = 1) {
  Rng rng = Rng::derive(seed, Stream::kBatchRouting, static_cast<std::uint64_t>(batch), static_cast<std::uint64_t>(layer));
  const LayerRouting r = m.route(batch, layer, tokens, rng);
  const auto c = r.expert_counts();
  std::vector<double> s(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) s[i] = static_cast<double>(c[i]) / static_cast<double>(tokens * r.top_k);
  return s;
}

// 4 sigma of a share estimated from `tokens` tokens each including the expert with prob k·p.
double tol(double p, int k, std::int64_t tokens) {
  const double pi = std::min(1.0, k * p);
  return 4.0 * std::sqrt(pi * (1 - pi) / static_cast<double>(tokens)) / k + 1e-9;
}

TEST(RoutingRegistry, AllModelsRegistered) {
  EXPECT_EQ(routing_models().names(),
            (std::vector<std::string>{"coactivation", "exponential", "fluctuating", "moeshard", "skewed", "skewness",
                                      "token-conditioned", "trace", "uniform", "zipf"}));
  for (const auto* e : routing_models().entries()) {
    EXPECT_FALSE(e->description.empty()) << e->name;
    for (const auto& spec : e->value.params) EXPECT_FALSE(spec.help.empty()) << e->name << "." << spec.name;
  }
}

TEST(RoutingModels, UniformIsBalanced) {
  const auto m = make("uniform", "", context(16, 2));
  const std::int64_t T = 100000;
  for (double s : shares(*m, T)) EXPECT_NEAR(s, 1.0 / 16, tol(1.0 / 16, 2, T));
}

TEST(RoutingModels, SkewedHotShareHarmoeny) {
  // HarMoEny §V-A with Switch (top-1, 128 experts): alpha = 0.9 → 90% of tokens on expert 0.
  const auto m = make("skewed", "{alpha: 0.9}", context(128, 1));
  const std::int64_t T = 200000;
  const auto s = shares(*m, T);
  EXPECT_NEAR(s[0], 0.9, tol(0.9, 1, T));
  EXPECT_NEAR(s[5], 0.1 / 127, tol(0.1 / 127, 1, T));
  // Ten hot experts share 90% (HarMoEny §III's "90% of the tokens to the first 10 experts").
  const auto m10 = make("skewed", "{alpha: 0.9, hot_experts: 10}", context(128, 1));
  const auto s10 = shares(*m10, T);
  EXPECT_NEAR(std::accumulate(s10.begin(), s10.begin() + 10, 0.0), 0.9, 4 * std::sqrt(0.09 / T));
  // alpha = 0 is uniform.
  Rng rng(1);
  const auto p0 = make("skewed", "{alpha: 0}", context(8, 2))->distribution(0, 0, rng);
  for (double v : p0) EXPECT_DOUBLE_EQ(v, 1.0 / 8);
}

TEST(RoutingModels, SkewedHotSetChoices) {
  Rng rng(1);
  const auto listed = make("skewed", "{alpha: 0.5, hot_list: [3, 9]}", context(16, 1))->distribution(0, 0, rng);
  EXPECT_DOUBLE_EQ(listed[3], 0.25);
  EXPECT_DOUBLE_EQ(listed[9], 0.25);
  EXPECT_DOUBLE_EQ(listed[0], 0.5 / 14);
  // "random": a hot set fixed by the seed, the same for every batch and layer.
  const auto r1 = make("skewed", "{alpha: 0.8, hot: random, hot_experts: 2}", context(64, 1, 11));
  const auto a = r1->distribution(0, 0, rng), b = r1->distribution(5, 3, rng);
  EXPECT_EQ(a, b);
  EXPECT_NEAR(*std::max_element(a.begin(), a.end()), 0.4, 1e-12);
  const auto r2 = make("skewed", "{alpha: 0.8, hot: random, hot_experts: 2}", context(64, 1, 12));
  EXPECT_NE(a, r2->distribution(0, 0, rng));
}

// A resolved scenario writes the default `hot_list: []` back next to `hot_experts`; loading it
// again must mean the same routing.
TEST(RoutingModels, SkewedEmptyHotListMeansHotExperts) {
  Rng rng(1);
  const auto plain = make("skewed", "{alpha: 0.6, hot_experts: 3}", context(16, 1))->distribution(0, 0, rng);
  const auto resolved =
      make("skewed", "{alpha: 0.6, hot_experts: 3, hot_list: [], hot: first}", context(16, 1))->distribution(0, 0, rng);
  EXPECT_EQ(plain, resolved);
  EXPECT_DOUBLE_EQ(resolved[2], 0.2);
}

TEST(RoutingModels, MoeShardRatio) {
  // MoEShard §4 defaults: alpha_r = 0.6, k_r = 10% of 128 = 13 experts.
  const int E = 128;
  const auto m = make("moeshard", "", context(E, 1));
  Rng rng(1);
  const auto p = m->distribution(0, 0, rng);
  EXPECT_NEAR(p[12] / p[13], (1.0 / E + 0.6) / (1.0 / E), 1e-9);
  EXPECT_DOUBLE_EQ(p[0], p[12]);
  const std::int64_t T = 200000;
  const auto s = shares(*m, T);
  const double hot = std::accumulate(s.begin(), s.begin() + 13, 0.0);
  const double expect_hot = 13 * (1.0 / E + 0.6) / (1.0 + 13 * 0.6);
  EXPECT_NEAR(hot, expect_hot, 4 * std::sqrt(expect_hot * (1 - expect_hot) / T));
  // An explicit k_r wins over the fraction.
  const auto p2 = make("moeshard", "{k_r: 2, alpha_r: 1.0}", context(8, 1))->distribution(0, 0, rng);
  EXPECT_GT(p2[1], p2[2]);
  EXPECT_DOUBLE_EQ(p2[2], p2[7]);
}

TEST(RoutingModels, TargetSkewnessMoeGps) {
  for (double target : {1.0, 1.4, 2.0, 3.0}) {
    const auto m = make("skewness", "{skewness: " + std::to_string(target) + "}", context(8, 2));
    Rng rng = Rng::derive(3, Stream::kBatchRouting, 0, 0);
    const LayerRouting r = m->route(0, 0, 400000, rng);
    EXPECT_NEAR(r.skewness(), target, target * 0.02) << target;
  }
  // The ceiling E/k: the hot expert is in every token's top-k.
  const auto top = make("skewness", "{skewness: 4}", context(8, 2));
  Rng rng(2);
  const auto c = top->route(0, 0, 1000, rng).expert_counts();
  EXPECT_EQ(c[0], 1000);
  EXPECT_THROW(make("skewness", "{skewness: 4.5}", context(8, 2)), InputError);
}

TEST(RoutingModels, ZipfAndExponentialShares) {
  const int E = 16;
  const std::int64_t T = 200000;
  const auto z = make("zipf", "{s: 1.2}", context(E, 1));
  double norm = 0;
  for (int i = 0; i < E; ++i) norm += std::pow(i + 1.0, -1.2);
  const auto sz = shares(*z, T);
  for (int i = 0; i < E; ++i) {
    const double p = std::pow(i + 1.0, -1.2) / norm;
    EXPECT_NEAR(sz[i], p, tol(p, 1, T)) << i;
  }
  const auto x = make("exponential", "{lambda: 0.3}", context(E, 2));
  double xn = 0;
  for (int i = 0; i < E; ++i) xn += std::exp(-0.3 * i);
  const auto sx = shares(*x, T);
  for (int i = 0; i < E; ++i) {
    const double p = std::exp(-0.3 * i) / xn;
    EXPECT_NEAR(sx[i], p, tol(p, 2, T)) << i;
  }
  // Random order: same multiset of shares, permuted by the seed.
  Rng rng(1);
  auto ranked = x->distribution(0, 0, rng);
  auto shuffled = make("exponential", "{lambda: 0.3, order: random}", context(E, 2))->distribution(0, 0, rng);
  EXPECT_NE(ranked, shuffled);
  std::sort(ranked.begin(), ranked.end());
  std::sort(shuffled.begin(), shuffled.end());
  for (int i = 0; i < E; ++i) EXPECT_NEAR(ranked[i], shuffled[i], 1e-15);
}

TEST(RoutingModels, FluctuatingPerBatchSameAcrossLayers) {
  const auto m = make("fluctuating", "", context(32, 1, 99));
  std::vector<double> hot_share;
  for (int b = 0; b < 20; ++b) {
    Rng r0 = Rng::derive(99, Stream::kBatchRouting, b, 0), r1 = Rng::derive(99, Stream::kBatchRouting, b, 3);
    const auto p0 = m->distribution(b, 0, r0), p3 = m->distribution(b, 3, r1);
    EXPECT_EQ(p0, p3) << "batch " << b;  // the same alpha and hot set for every layer of a batch
    hot_share.push_back(*std::max_element(p0.begin(), p0.end()));
  }
  const auto [lo, hi] = std::minmax_element(hot_share.begin(), hot_share.end());
  EXPECT_GT(*hi - *lo, 0.3);  // alpha ~ U[0, 0.95] varies across batches
  EXPECT_LE(*hi, 0.95 + 1e-12);
  EXPECT_THROW(make("fluctuating", "{alpha_min: 0.8, alpha_max: 0.2}", context(8, 1)), InputError);
}

// HarMoEny Fig. 1: deeper layers more skewed. MoE layer l of L uses alpha·(1 − g + g·l/(L−1)).
TEST(RoutingModels, SkewedDepthGradientRaisesSkewWithDepth) {
  const auto m = make("skewed", "{alpha: 0.8, depth_gradient: 0.5}", context(16, 1));  // L = 4
  Rng rng(1);
  for (int l = 0; l < 4; ++l) {
    const double alpha = 0.8 * (0.5 + 0.5 * l / 3.0);
    const auto p = m->distribution(0, l, rng);
    EXPECT_NEAR(p[0], alpha, 1e-12) << l;
    EXPECT_NEAR(p[1], (1 - alpha) / 15, 1e-12) << l;
  }
  double prev = 0.0;
  for (int l = 0; l < 4; ++l) {
    Rng r = Rng::derive(1, Stream::kBatchRouting, 0, static_cast<std::uint64_t>(l));
    const double skew = m->route(0, l, 20000, r).skewness();
    EXPECT_GT(skew, prev + 1.0) << l;  // alpha grows by 0.133 per layer: +2.1 in skewness
    prev = skew;
  }
  // g = 1: the first layer has alpha 0, i.e. uniform; one MoE layer keeps alpha.
  const auto full = make("skewed", "{alpha: 0.8, depth_gradient: 1}", context(16, 1));
  for (double v : full->distribution(0, 0, rng)) EXPECT_DOUBLE_EQ(v, 1.0 / 16);
  RoutingContext one = context(16, 1);
  one.moe_layers = 1;
  EXPECT_NEAR(make("skewed", "{alpha: 0.8, depth_gradient: 1}", one)->distribution(0, 0, rng)[0], 0.8, 1e-12);
}

TEST(RoutingModels, ZeroDepthGradientChangesNothing) {
  for (const std::string kind : {"skewed", "fluctuating"}) {
    const std::string opts = kind == "skewed" ? "alpha: 0.7, hot_experts: 3" : "alpha_min: 0.2";
    const auto plain = make(kind, "{" + opts + "}", context(32, 2, 4));
    const auto zero = make(kind, "{" + opts + ", depth_gradient: 0}", context(32, 2, 4));
    for (int b = 0; b < 3; ++b)
      for (int l = 0; l < 4; ++l) {
        Rng a = Rng::derive(4, Stream::kBatchRouting, b, l), c = Rng::derive(4, Stream::kBatchRouting, b, l);
        EXPECT_EQ(plain->route(b, l, 3000, a).experts, zero->route(b, l, 3000, c).experts) << kind << b << l;
      }
  }
}

TEST(RoutingModels, FluctuatingWithDepthGradient) {
  // Per batch: one alpha and one hot set, scaled per layer; the last layer keeps the batch's alpha.
  const auto plain = make("fluctuating", "{alpha_min: 0.5, alpha_max: 0.9}", context(32, 1, 8));
  const auto deep = make("fluctuating", "{alpha_min: 0.5, alpha_max: 0.9, depth_gradient: 0.6}", context(32, 1, 8));
  for (int b = 0; b < 10; ++b) {
    Rng rng(1);
    const auto last = plain->distribution(b, 0, rng);
    EXPECT_EQ(deep->distribution(b, 3, rng), last) << b;
    const auto hot = std::max_element(last.begin(), last.end()) - last.begin();
    for (int l = 0; l < 4; ++l) {
      const auto p = deep->distribution(b, l, rng);
      EXPECT_EQ(std::max_element(p.begin(), p.end()) - p.begin(), hot) << b << " " << l;  // same hot set
      EXPECT_NEAR(p[hot], last[hot] * (0.4 + 0.6 * l / 3.0), 1e-12) << b << " " << l;
    }
  }
}

TEST(RoutingModels, DepthGradientOutsideUnitIntervalIsAnError) {
  for (const std::string kind : {"skewed", "fluctuating"}) {
    Diagnostics d;
    read_params(YAML::Load("{depth_gradient: 1.5}"), routing_models().get(kind).value.params, SourceMap("t.yaml"), d);
    EXPECT_FALSE(d.empty()) << kind;
  }
}

TEST(RoutingModels, SameSeedSameRoutingDifferentSeedDifferent) {
  for (const std::string kind : {"uniform", "skewed", "zipf", "fluctuating"}) {
    const auto m = make(kind, "", context(64, 4, 5));
    Rng a = Rng::derive(5, Stream::kBatchRouting, 1, 2), b = Rng::derive(5, Stream::kBatchRouting, 1, 2), c = Rng::derive(6, Stream::kBatchRouting, 1, 2);
    const auto ra = m->route(1, 2, 5000, a).experts;
    EXPECT_EQ(ra, m->route(1, 2, 5000, b).experts) << kind;
    EXPECT_NE(ra, m->route(1, 2, 5000, c).experts) << kind;
  }
}

TEST(RoutingModels, FactoryErrorsAreInputErrors) {
  EXPECT_THROW(make("skewed", "{hot_experts: 9}", context(8, 1)), InputError);
  EXPECT_THROW(make("skewed", "{hot_list: [1, 8]}", context(8, 1)), InputError);
  EXPECT_THROW(make("skewed", "{hot_list: [1, 1]}", context(8, 1)), InputError);
  EXPECT_THROW(make("moeshard", "{k_r: 9}", context(8, 1)), InputError);
  try {
    make("skewness", "{skewness: 100}", context(64, 8));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.diagnostics().at(0).where.file, "test.yaml");
    EXPECT_NE(std::string(e.what()).find("E/top_k"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moesim
