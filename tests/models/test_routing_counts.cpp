// Count-level routing against token draws: the same per-expert marginals (Binomial(n, π_e)),
// each source's selections summing to tokens × k, no expert above the token count; and the
// binomial sampler's moments, and its shortcuts drawing what the plain inversion draws.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "models/routing.hpp"

namespace moesim {

TEST(BinomialDraw, MomentsMatchInBothRegimes) {
  for (const auto& [n, p] : std::vector<std::pair<std::int64_t, double>>{{50, 0.1}, {10000, 0.3}, {10000, 0.9}, {7, 0.5}}) {
    Rng rng(3);
    const int draws = 20000;
    double sum = 0.0, sq = 0.0;
    for (int i = 0; i < draws; ++i) {
      const auto x = static_cast<double>(binomial_draw(n, p, rng));
      ASSERT_GE(x, 0.0);
      ASSERT_LE(x, static_cast<double>(n));
      sum += x;
      sq += x * x;
    }
    const double mean = sum / draws, var = sq / draws - mean * mean;
    const double m = static_cast<double>(n) * p, v = m * (1.0 - p);
    EXPECT_NEAR(mean, m, 5.0 * std::sqrt(v / draws)) << n << " " << p;
    EXPECT_NEAR(var / v, 1.0, 0.06) << n << " " << p;
  }
}

// The inversion as it was before its shortcuts: std::pow for P(0), then the CDF term by term.
// binomial_draw must give the same draw from the same generator state for every (n, p): its
// Bernoulli bound and repeated-squaring path only decide draws that are clear of their error.
std::int64_t reference_inversion(std::int64_t n, double p, Rng& rng) {
  const double q = 1.0 - p;
  const double ratio = p / q;
  double prob = std::pow(q, static_cast<double>(n));
  double cdf = prob;
  const double u = rng.uniform01();
  std::int64_t k = 0;
  while (u > cdf && k < n) {
    prob *= ratio * static_cast<double>(n - k) / static_cast<double>(k + 1);
    cdf += prob;
    ++k;
    if (prob <= 0.0 && cdf < u) break;
  }
  return k;
}

TEST(BinomialDraw, SmallMeansDrawExactlyWhatTheReferenceInversionDraws) {
  Rng params(17);
  std::int64_t draws = 0;
  for (int trial = 0; trial < 200000; ++trial) {
    // n from 1 to 100,000 (past the 2^16 the shortcuts take), p up to 0.5 with n·p < 20.
    const auto n = static_cast<std::int64_t>(1 + params.below(trial % 3 == 0 ? 100000 : 300));
    const double p = std::min(0.5, params.uniform01() * 19.9 / static_cast<double>(n));
    if (p <= 0.0) continue;
    const std::uint64_t seed = params.next();
    Rng a(seed), b(seed);
    ASSERT_EQ(binomial_draw(n, p, a), reference_inversion(n, p, b)) << "n " << n << " p " << p;
    ASSERT_EQ(a.next(), b.next());  // the same draws consumed
    ++draws;
  }
  EXPECT_GT(draws, 190000);
}

TEST(CountSample, SourcesSumToTokensTimesKAndNoExpertExceedsTheTokens) {
  const std::vector<double> pi = inclusion_probabilities({0.5, 0.2, 0.1, 0.1, 0.05, 0.05}, 2);
  Rng rng(11);
  const std::vector<std::int64_t> tokens = {0, 1, 37, 5000};
  const LayerRouting r = count_sample(pi, 2, tokens, rng);
  ASSERT_TRUE(r.by_count);
  EXPECT_EQ(r.num_tokens, 5038);
  for (std::size_t g = 0; g < tokens.size(); ++g) {
    std::int64_t sum = 0;
    for (int e = 0; e < 6; ++e) {
      const std::int64_t c = r.counts[g * 6 + static_cast<std::size_t>(e)];
      EXPECT_GE(c, 0);
      EXPECT_LE(c, tokens[g]);  // an expert is chosen at most once per token
      sum += c;
    }
    EXPECT_EQ(sum, tokens[g] * 2);
  }
  // Expert 0 has π = 1 (k·p = 1): every token selects it.
  EXPECT_EQ(r.counts[3 * 6 + 0], 5000);
}

// Per-expert counts of one source: mean n·π_e and variance n·π_e(1 − π_e), as token draws
// (systematic_sample gives each token an independent uniform, so its counts are binomial).
TEST(CountSample, MarginalsMatchTokenDraws) {
  const std::vector<double> p = {0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05};
  const std::vector<double> pi = inclusion_probabilities(p, 2);
  const std::int64_t n = 400;
  const int trials = 3000;
  std::vector<double> sum_c(8, 0.0), sq_c(8, 0.0), sum_t(8, 0.0), sq_t(8, 0.0);
  Rng rng(5);
  for (int i = 0; i < trials; ++i) {
    const LayerRouting c = count_sample(pi, 2, {n}, rng);
    const std::vector<std::int64_t> tc = systematic_sample(pi, 2, n, rng).expert_counts();
    for (int e = 0; e < 8; ++e) {
      const auto x = static_cast<double>(c.counts[static_cast<std::size_t>(e)]), y = static_cast<double>(tc[static_cast<std::size_t>(e)]);
      sum_c[e] += x;
      sq_c[e] += x * x;
      sum_t[e] += y;
      sq_t[e] += y * y;
    }
  }
  for (int e = 0; e < 8; ++e) {
    const double m = static_cast<double>(n) * pi[static_cast<std::size_t>(e)], v = m * (1.0 - pi[static_cast<std::size_t>(e)]);
    const double mc = sum_c[e] / trials, mt = sum_t[e] / trials;
    const double vc = sq_c[e] / trials - mc * mc, vt = sq_t[e] / trials - mt * mt;
    EXPECT_NEAR(mc, m, 5.0 * std::sqrt(v / trials)) << "expert " << e;
    EXPECT_NEAR(mt, m, 5.0 * std::sqrt(v / trials)) << "expert " << e;
    // Sample variances of 3000 trials are within ~8% (5 σ of a chi-square) of the truth.
    EXPECT_NEAR(vc / v, 1.0, 0.15) << "expert " << e;
    EXPECT_NEAR(vt / v, 1.0, 0.15) << "expert " << e;
  }
}

}  // namespace moesim
