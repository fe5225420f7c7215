// Expert-load predictors (MoE-GPS §3.2–3.3): the MLE and its error rate, the oracle, and the
// token-to-expert accuracy, wrong guesses and overhead curve. Closed forms where they exist,
// binomial tolerances where draws are involved.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "models/model_spec.hpp"
#include "models/routing.hpp"
#include "predictors/estimates.hpp"
#include "predictors/predictor.hpp"

namespace moesim {
namespace {

// A skewness-2 distribution over 8 experts (max share 0.25 = 2 · 1/8), top-2 as Mixtral.
const std::vector<double> kSkewed = {0.25, 0.2, 0.15, 0.1, 0.1, 0.08, 0.07, 0.05};

ModelSpec one_moe_layer(int experts, int top_k) {
  ModelSpec m;
  m.layers = 1;
  m.experts = experts;
  m.top_k = top_k;
  return m;
}

// The predictor `name` with options written as a YAML mapping.
std::unique_ptr<Predictor> make(const std::string& name, const std::string& options = "{}") {
  Diagnostics diags;
  const ParamSet p = read_params(YAML::Load(options), predictors().get(name).value.params, SourceMap("t.yaml"), diags);
  EXPECT_TRUE(diags.empty());
  return predictors().get(name).value.make(p);
}

// `tokens` tokens drawn from shares `p` with `top_k` distinct experts each.
LayerRouting draw(const std::vector<double>& p, int top_k, std::int64_t tokens, std::uint64_t seed) {
  Rng rng(seed);
  return systematic_sample(inclusion_probabilities(p, top_k), top_k, tokens, rng);
}

// A top-1 routing with the given expert per token.
LayerRouting by_hand(int experts, std::vector<std::int32_t> expert_of_token) {
  LayerRouting r;
  r.num_tokens = static_cast<std::int64_t>(expert_of_token.size());
  r.top_k = 1;
  r.num_experts = experts;
  r.experts = std::move(expert_of_token);
  return r;
}

// A one-MoE-layer model and a predictor context whose training window is `training`.
struct Training {
  ModelSpec model;
  PrefillWorkload workload;
  PredictorContext ctx{model, workload, 4};
  Training(int experts, int top_k, std::function<LayerRouting(int, int)> training)
      : model(one_moe_layer(experts, top_k)) {
    ctx.training_routing = std::move(training);
  }
};

}  // namespace

TEST(ErrorRate, IsTheL1DistanceOnAHandMadeCase) {
  // mean_i |p̂_i − p_i| = (0.25 + 0 + 0 + 0.25) / 4 = 0.125; over 1/E = 0.25 that is 0.5.
  EXPECT_DOUBLE_EQ(distribution_error_rate({0.5, 0.25, 0.25, 0.0}, {0.25, 0.25, 0.25, 0.25}), 0.5);
  EXPECT_DOUBLE_EQ(distribution_error_rate(kSkewed, kSkewed), 0.0);
  EXPECT_DOUBLE_EQ(distribution_error_rate({1, 0}, {0, 1}), 2.0);  // disjoint: the maximum
  EXPECT_THROW(distribution_error_rate({1.0}, {0.5, 0.5}), std::invalid_argument);
}

TEST(DistributionOnly, EstimateIsCountsOverSelections) {
  // Window 2 of hand-made batches: expert 0 chosen 5 times, 1 twice, 2 once, 3 never.
  Training s(4, 1, [](int i, int) { return i == 0 ? by_hand(4, {0, 0, 0, 1}) : by_hand(4, {0, 0, 1, 2}); });
  auto p = make("distribution-only", "{window: 2}");
  p->setup(s.ctx);
  const LayerRouting batch = by_hand(4, {3, 3, 3, 3});
  Rng rng(1);
  const Forecast f = p->forecast(0, 0, batch, rng);
  EXPECT_EQ(f.kind, Forecast::Kind::kDistribution);
  EXPECT_TRUE(f.selection_expert.empty());  // no per-token information
  ASSERT_EQ(f.expert_share.size(), 4u);
  EXPECT_DOUBLE_EQ(f.expert_share[0], 5.0 / 8);
  EXPECT_DOUBLE_EQ(f.expert_share[1], 2.0 / 8);
  EXPECT_DOUBLE_EQ(f.expert_share[2], 1.0 / 8);
  EXPECT_DOUBLE_EQ(f.expert_share[3], 0.0);
  // ε against the batch it is used on (all on expert 3): |5/8| + |2/8| + |1/8| + |0 − 1| = 2.
  EXPECT_DOUBLE_EQ(f.error, 2.0);
  EXPECT_EQ(f.overhead_ms, 0.0);
  EXPECT_EQ(f.error_model, ErrorModel::kTypical);
}

TEST(DistributionOnly, ErrorAgainstTheTrueDistributionFallsWithTheWindow) {
  // Mean over independent training sets of the error rate of p̂ against the true p: the MLE's
  // error shrinks like 1/sqrt(N), so each 4x larger window should roughly halve it.
  const std::int64_t tokens = 512;
  std::vector<double> mean_error;
  for (const int window : {1, 4, 16, 64}) {
    double sum = 0.0;
    const int repeats = 40;
    for (int r = 0; r < repeats; ++r) {
      Training s(8, 2, [r](int i, int) { return draw(kSkewed, 2, tokens, 1000u * static_cast<unsigned>(r) + i); });
      auto p = make("distribution-only", "{window: " + std::to_string(window) + "}");
      p->setup(s.ctx);
      Rng rng(7);
      sum += distribution_error_rate(p->forecast(0, 0, draw(kSkewed, 2, tokens, 99), rng).expert_share, kSkewed);
    }
    mean_error.push_back(sum / repeats);
  }
  for (std::size_t i = 1; i < mean_error.size(); ++i) {
    EXPECT_LT(mean_error[i], 0.7 * mean_error[i - 1]) << "window step " << i;
    EXPECT_GT(mean_error[i], 0.3 * mean_error[i - 1]) << "window step " << i;  // ~1/2, not faster
  }
  EXPECT_LT(mean_error.back(), 0.03);
}

TEST(DistributionOnly, OnlineUpdateMovesTheEstimateTowardObservedBatches) {
  // Trained on one batch with every expert once (p̂ uniform), then shown a batch all on expert 0.
  Training s(8, 1, [](int, int) { return by_hand(8, {0, 1, 2, 3, 4, 5, 6, 7}); });
  const LayerRouting hot = by_hand(8, {0, 0, 0, 0, 0, 0, 0, 0});
  for (const bool online : {false, true}) {
    auto p = make("distribution-only", std::string("{window: 1, online: ") + (online ? "true}" : "false}"));
    p->setup(s.ctx);
    Rng rng(1);
    const Forecast before = p->forecast(0, 0, hot, rng);
    p->observe(0, 0, hot);
    const Forecast after = p->forecast(1, 0, hot, rng);
    EXPECT_DOUBLE_EQ(before.expert_share[0], 1.0 / 8);
    // Counts accumulate: (1 + 8) / (8 + 8) online; unchanged offline.
    EXPECT_DOUBLE_EQ(after.expert_share[0], online ? 9.0 / 16 : 1.0 / 8) << online;
    if (online) {
      EXPECT_LT(after.error, before.error);
    } else {
      EXPECT_EQ(after.error, before.error);
    }
  }
}

TEST(DistributionOnly, WithoutTrainingDataStartsUniform) {
  Training s(4, 1, {});
  auto p = make("distribution-only", "{error_model: pessimistic}");
  p->setup(s.ctx);
  Rng rng(1);
  const Forecast f = p->forecast(0, 0, by_hand(4, {0, 1, 2, 3}), rng);
  for (const double share : f.expert_share) EXPECT_DOUBLE_EQ(share, 0.25);
  EXPECT_DOUBLE_EQ(f.error, 0.0);
  EXPECT_EQ(f.error_model, ErrorModel::kPessimistic);
}

TEST(Oracle, ReturnsTheTruthWithNoErrorAndNoCost) {
  const LayerRouting truth = draw(kSkewed, 2, 1000, 3);
  Rng rng(1);
  const Forecast f = make("oracle")->forecast(0, 0, truth, rng);
  EXPECT_EQ(f.kind, Forecast::Kind::kTokens);
  EXPECT_EQ(f.selection_expert, truth.experts);
  EXPECT_EQ(f.expert_share, expert_shares(truth));
  EXPECT_EQ(f.error, 0.0);
  EXPECT_EQ(f.overhead_ms, 0.0);
}

TEST(TokenToExpert, RealisedAccuracyIsWithinBinomialTolerance) {
  const LayerRouting truth = draw(kSkewed, 2, 50000, 5);
  const double n = static_cast<double>(truth.experts.size());
  for (const double a : {0.0, 0.5, 0.8, 0.9, 1.0}) {
    Rng rng(11);
    const Forecast f = make("token-to-expert", "{accuracy: " + std::to_string(a) + "}")->forecast(0, 0, truth, rng);
    ASSERT_EQ(f.selection_expert.size(), truth.experts.size());
    double right = 0.0;
    for (std::size_t i = 0; i < truth.experts.size(); ++i) right += f.selection_expert[i] == truth.experts[i] ? 1 : 0;
    const double accuracy = right / n;
    EXPECT_NEAR(accuracy, a, 4.0 * std::sqrt(a * (1 - a) / n) + 1e-12) << a;
    EXPECT_DOUBLE_EQ(f.error, 1.0 - accuracy) << a;
    // Shares are those of the predicted selections.
    std::vector<std::int64_t> counts(8, 0);
    for (const auto e : f.selection_expert) ++counts[static_cast<std::size_t>(e)];
    EXPECT_EQ(f.expert_share, shares_of_counts(counts));
  }
}

TEST(TokenToExpert, WrongGuessesAvoidTheTokensExpertsAndAreUniform) {
  const LayerRouting truth = draw(kSkewed, 2, 20000, 6);
  Rng rng(12);
  const Forecast f = make("token-to-expert", "{accuracy: 0.3}")->forecast(0, 0, truth, rng);
  for (std::int64_t t = 0; t < truth.num_tokens; ++t) {
    const std::set<std::int32_t> mine = {truth.expert(t, 0), truth.expert(t, 1)};
    const std::int32_t g0 = f.selection_expert[static_cast<std::size_t>(2 * t)];
    const std::int32_t g1 = f.selection_expert[static_cast<std::size_t>(2 * t + 1)];
    EXPECT_NE(g0, g1) << t;  // a token names each expert once
    for (int s = 0; s < 2; ++s) {
      const std::int32_t g = s == 0 ? g0 : g1;
      if (g != truth.expert(t, s)) {
        ASSERT_EQ(mine.count(g), 0u) << "token " << t << " slot " << s;
      }
    }
  }
  // Top-1, every token on expert 0, always wrong: guesses spread evenly over experts 1..7.
  const LayerRouting all0 = by_hand(8, std::vector<std::int32_t>(70000, 0));
  Rng rng2(13);
  const Forecast w = make("token-to-expert", "{accuracy: 0}")->forecast(0, 0, all0, rng2);
  std::vector<double> counts(8, 0.0);
  for (const auto e : w.selection_expert) counts[static_cast<std::size_t>(e)] += 1;
  EXPECT_EQ(counts[0], 0.0);
  for (int e = 1; e < 8; ++e) EXPECT_NEAR(counts[static_cast<std::size_t>(e)], 10000.0, 5 * std::sqrt(10000.0 * 6 / 7)) << e;
  EXPECT_DOUBLE_EQ(w.error, 1.0);
}

TEST(TokenToExpert, WithAsManyExpertsAsSelectionsAWrongGuessIsStillWrong) {
  // Two experts, top-2: the token's experts cover all of them, so only the slot's own is avoided.
  LayerRouting truth;
  truth.num_tokens = 1000;
  truth.top_k = 2;
  truth.num_experts = 2;
  for (int t = 0; t < 1000; ++t) truth.experts.insert(truth.experts.end(), {t % 2, 1 - t % 2});
  Rng rng(3);
  const Forecast f = make("token-to-expert", "{accuracy: 0}")->forecast(0, 0, truth, rng);
  for (std::size_t i = 0; i < truth.experts.size(); ++i) EXPECT_NE(f.selection_expert[i], truth.experts[i]);
}

TEST(TokenToExpert, OverheadIsExponentialInAccuracyAndFallsWithSkew) {
  // Counts {3, 2, 2, 1}: skewness 3 / 2 = 1.5 = s_ref, so the overhead is c0 · exp(c1 · a).
  const LayerRouting at_ref = by_hand(4, {0, 0, 0, 1, 1, 2, 2, 3});
  ASSERT_DOUBLE_EQ(at_ref.skewness(), 1.5);
  // Quoted per 8 tokens, the size of these hand-made layers.
  const std::string curve =
      "overhead_c0_ms: 0.01, overhead_c1: 6, overhead_skew_ref: 1.5, overhead_skew_exponent: 2, overhead_tokens_ref: 8";
  auto overhead = [&](double a, const LayerRouting& truth) {
    Rng rng(1);
    return make("token-to-expert", "{accuracy: " + std::to_string(a) + ", " + curve + "}")
        ->forecast(0, 0, truth, rng)
        .overhead_ms;
  };
  EXPECT_NEAR(overhead(0.0, at_ref), 0.01, 1e-15);
  for (const auto& [a1, a2] : {std::pair{0.5, 0.8}, std::pair{0.8, 0.95}, std::pair{0.2, 1.0}})
    EXPECT_NEAR(overhead(a2, at_ref) / overhead(a1, at_ref), std::exp(6 * (a2 - a1)), 1e-12 * std::exp(6 * (a2 - a1)));
  // Counts {6, 1, 1, 0}: skewness 3, twice s_ref, so (1.5 / 3)^2 = 1/4 of the cost.
  const LayerRouting skewed = by_hand(4, {0, 0, 0, 0, 0, 0, 1, 2});
  ASSERT_DOUBLE_EQ(skewed.skewness(), 3.0);
  EXPECT_NEAR(overhead(0.9, skewed), overhead(0.9, at_ref) / 4, 1e-15);
  EXPECT_LT(overhead(0.9, skewed), overhead(0.9, at_ref));
  // The predictor runs on every token: twice the tokens (same skewness), twice the overhead.
  const LayerRouting twice = by_hand(4, {0, 0, 0, 1, 1, 2, 2, 3, 0, 0, 0, 1, 1, 2, 2, 3});
  ASSERT_DOUBLE_EQ(twice.skewness(), 1.5);
  EXPECT_NEAR(overhead(0.9, twice), 2 * overhead(0.9, at_ref), 1e-12);
  // The curve itself, as OverheadCurve states it.
  const OverheadCurve c{0.01, 6, 1.5, 2};
  EXPECT_DOUBLE_EQ(c.at(0.9, 1.5), 0.01 * std::exp(5.4));
  EXPECT_EQ(c.at(0.9, 0.0), 0.0);  // nothing routed: no predictor runs
}

TEST(TokenToExpert, DefaultCurveRisesSteeplyTowardPerfectAccuracy) {
  // At the default s_ref the default curve must cost little at a = 0.5 and be >100x that at 1.
  const LayerRouting truth = by_hand(5, {0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4});
  ASSERT_NEAR(truth.skewness(), 1.4, 1e-12);  // counts {7, 5, 5, 4, 4}: 7 / 5
  auto overhead = [&](double a) {
    Rng rng(1);
    return make("token-to-expert", "{accuracy: " + std::to_string(a) + "}")->forecast(0, 0, truth, rng).overhead_ms;
  };
  EXPECT_LT(overhead(0.5), 0.05);
  EXPECT_GT(overhead(1.0), 100 * overhead(0.5));
}

TEST(Predictors, EveryPredictorIsRegisteredWithItsErrorModel) {
  for (const char* name : {"none", "oracle", "distribution-only", "token-to-expert"})
    EXPECT_TRUE(predictors().contains(name)) << name;
  Rng rng(1);
  const LayerRouting truth = by_hand(4, {0, 1, 2, 3});
  EXPECT_EQ(make("token-to-expert", "{error_model: optimistic}")->forecast(0, 0, truth, rng).error_model,
            ErrorModel::kOptimistic);
  EXPECT_EQ(make("none")->forecast(0, 0, truth, rng).kind, Forecast::Kind::kNone);
}

}  // namespace moesim
