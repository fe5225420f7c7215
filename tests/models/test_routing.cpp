// Routing primitives: inclusion probabilities, systematic sampling (k distinct experts per
// token, exact marginals, zero-share experts never chosen), counts/skewness, determinism, speed.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <numeric>
#include <set>

#include "models/routing.hpp"

namespace moesim {
namespace {

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

TEST(InclusionProbabilities, ProportionalWhenNothingCaps) {
  const auto pi = inclusion_probabilities({0.1, 0.2, 0.3, 0.4}, 2);
  EXPECT_NEAR(pi[0], 0.2, 1e-12);
  EXPECT_NEAR(pi[3], 0.8, 1e-12);
  EXPECT_NEAR(sum(pi), 2.0, 1e-12);
}

TEST(InclusionProbabilities, CapsAtOneAndRedistributes) {
  // k·p = {2.7, 0.1, 0.1, 0.1}: the hot expert is capped at 1, the other 2 units go evenly.
  const auto pi = inclusion_probabilities({0.9, 1.0 / 30, 1.0 / 30, 1.0 / 30}, 3);
  EXPECT_DOUBLE_EQ(pi[0], 1.0);
  for (int i = 1; i < 4; ++i) EXPECT_NEAR(pi[i], 2.0 / 3, 1e-12);
  EXPECT_NEAR(sum(pi), 3.0, 1e-12);
}

TEST(InclusionProbabilities, CascadingCaps) {
  // Capping the first pushes the second over 1 too: iterate until stable.
  const std::vector<double> p = {0.5, 0.3, 0.1, 0.05, 0.05};
  const auto pi = inclusion_probabilities(p, 3);
  EXPECT_DOUBLE_EQ(pi[0], 1.0);
  EXPECT_DOUBLE_EQ(pi[1], 1.0);
  EXPECT_NEAR(pi[2], 0.5, 1e-12);   // 1 unit over {0.1, 0.05, 0.05} proportionally
  EXPECT_NEAR(pi[3], 0.25, 1e-12);
  EXPECT_NEAR(sum(pi), 3.0, 1e-12);
  for (double v : pi) EXPECT_LE(v, 1.0);
}

TEST(InclusionProbabilities, FewerNonzeroThanK) {
  // Two experts with any share but k = 3: both always chosen, the third slot spread evenly.
  const auto pi = inclusion_probabilities({0.5, 0.5, 0.0, 0.0}, 3);
  EXPECT_DOUBLE_EQ(pi[0], 1.0);
  EXPECT_DOUBLE_EQ(pi[1], 1.0);
  EXPECT_NEAR(pi[2], 0.5, 1e-12);
  EXPECT_NEAR(sum(pi), 3.0, 1e-12);
  EXPECT_THROW(inclusion_probabilities({1.0, 1.0}, 3), std::invalid_argument);
}

TEST(SystematicSample, KDistinctExpertsAndExactMarginals) {
  const std::vector<double> p = {0.30, 0.20, 0.15, 0.10, 0.10, 0.05, 0.05, 0.05};
  const int k = 3;
  const auto pi = inclusion_probabilities(p, k);
  Rng rng(42);
  const std::int64_t T = 200000;
  const LayerRouting r = systematic_sample(pi, k, T, rng);
  ASSERT_EQ(r.experts.size(), static_cast<std::size_t>(T * k));
  for (std::int64_t t = 0; t < T; ++t) {
    std::set<int> s;
    for (int j = 0; j < k; ++j) s.insert(r.expert(t, j));
    ASSERT_EQ(s.size(), static_cast<std::size_t>(k)) << "token " << t;
  }
  const auto counts = r.expert_counts();
  EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), std::int64_t{0}), T * k);
  for (std::size_t i = 0; i < p.size(); ++i) {
    // Each token includes expert i independently with probability pi_i.
    const double sd = std::sqrt(T * pi[i] * (1 - pi[i]));
    EXPECT_NEAR(static_cast<double>(counts[i]), T * pi[i], 4 * sd + 1) << "expert " << i;
  }
}

TEST(SystematicSample, ZeroShareNeverChosenAndCertainAlwaysChosen) {
  const std::vector<double> pi = {1.0, 0.0, 0.5, 0.0, 0.5, 1.0};  // sums to 3
  Rng rng(7);
  const LayerRouting r = systematic_sample(pi, 3, 50000, rng);
  const auto c = r.expert_counts();
  EXPECT_EQ(c[0], 50000);
  EXPECT_EQ(c[5], 50000);
  EXPECT_EQ(c[1], 0);
  EXPECT_EQ(c[3], 0);
  EXPECT_EQ(c[2] + c[4], 50000);
}

TEST(SystematicSample, CoSelectedPairsVary) {
  // One fixed order would only ever pair experts 4 apart (4 pairs for top-2 of 8 uniform).
  Rng rng(3);
  const LayerRouting r = systematic_sample(std::vector<double>(8, 0.25), 2, 20000, rng);
  std::set<std::pair<int, int>> pairs;
  for (std::int64_t t = 0; t < r.num_tokens; ++t)
    pairs.insert(std::minmax(r.expert(t, 0), r.expert(t, 1)));
  EXPECT_EQ(pairs.size(), 28u);  // all C(8,2) pairs occur
}

TEST(SystematicSample, DeterministicPerStream) {
  const auto pi = inclusion_probabilities(std::vector<double>(64, 1.0 / 64), 8);
  Rng a = Rng::derive(1, Stream::kBatchRouting, 3, 5), b = Rng::derive(1, Stream::kBatchRouting, 3, 5), c = Rng::derive(2, Stream::kBatchRouting, 3, 5);
  const auto ra = systematic_sample(pi, 8, 1000, a).experts;
  EXPECT_EQ(ra, systematic_sample(pi, 8, 1000, b).experts);
  EXPECT_NE(ra, systematic_sample(pi, 8, 1000, c).experts);
}

TEST(SystematicSample, MillionTokensIsFast) {
  // O(T·k·log E): a million tokens of top-8 over 256 experts in well under a second.
  std::vector<double> p(256);
  for (int i = 0; i < 256; ++i) p[i] = 1.0 / (i + 1);
  const auto pi = inclusion_probabilities(p, 8);
  Rng rng(1);
  const auto start = std::chrono::steady_clock::now();
  const LayerRouting r = systematic_sample(pi, 8, 1 << 20, rng);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.num_tokens, 1 << 20);
  EXPECT_LT(s, 2.0);
}

TEST(LayerRouting, CountsAndSkewness) {
  LayerRouting r;
  r.num_tokens = 4;
  r.top_k = 1;
  r.num_experts = 4;
  r.experts = {0, 0, 0, 1};
  EXPECT_EQ(r.expert_counts(), (std::vector<std::int64_t>{3, 1, 0, 0}));
  EXPECT_DOUBLE_EQ(r.skewness(), 3.0);  // MoE-GPS Fig. 2: 75% on one of 4 experts
  r.top_k = 2;
  r.num_tokens = 2;
  EXPECT_DOUBLE_EQ(r.skewness(), 3.0);  // mean = 2·2/4 = 1
  LayerRouting empty;
  empty.num_experts = 4;
  EXPECT_DOUBLE_EQ(empty.skewness(), 0.0);
}

}  // namespace
}  // namespace moesim
