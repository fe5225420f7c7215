// MoE-GPS App. B's trained frequency predictors: `probability` predicts the globally most frequent
// experts; `conditional-probability` learns per token id (or position) and beats it exactly when
// the routing has such structure; held-out accuracy predicts live accuracy; correct predictions
// sit in the slot of the true expert.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <optional>

#include "models/model_spec.hpp"
#include "predictors/estimates.hpp"
#include "predictors/predictor.hpp"

namespace moesim {
// Defined in predictors/trained.cpp.

namespace {

constexpr std::uint64_t kSeed = 5;

/// Mixtral 8x7B (8 experts, top-2) cut to two MoE layers, 16 sequences of 512 tokens per batch
/// (MoE-GPS §3.2 measured sequences of 512), routed by `routing_yaml` of routing model `kind`.
struct Bench {
  ModelSpec model = model_presets().get("mixtral-8x7b").value;
  PrefillWorkload workload{16, 512, 4};
  std::unique_ptr<RoutingModel> routing;

  Bench(const std::string& kind, const std::string& routing_yaml, int top_k = 2) {
    model.layers = 2;
    model.top_k = top_k;
    RoutingContext rc;
    rc.experts = model.experts;
    rc.top_k = top_k;
    rc.moe_layers = model.num_moe_layers();
    rc.seed = kSeed;
    rc.seq_len = workload.seq_len;
    const auto& info = routing_models().get(kind).value;
    Diagnostics d;
    const ParamSet p = read_params(YAML::Load(routing_yaml), info.params, SourceMap("r.yaml"), d);
    EXPECT_TRUE(d.empty()) << d.to_string();
    routing = info.make(p, rc, SourceLocation{"r.yaml", 1, 1});
  }

  /// Training batches come from streams and batch numbers apart from the simulated ones.
  PredictorContext context() const {
    PredictorContext ctx{model, workload, 4};
    ctx.training_routing = [this](int i, int l) {
      Rng rng = Rng::derive(kSeed, Stream::kTrainingRouting, static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(l));
      return routing->route(-1000 - i, l, workload.tokens_per_batch(), rng);
    };
    return ctx;
  }

  LayerRouting batch(int b, int l) const {
    Rng rng = Rng::derive(kSeed, Stream::kBatchRouting, static_cast<std::uint64_t>(b), static_cast<std::uint64_t>(l));
    return routing->route(b, l, workload.tokens_per_batch(), rng);
  }

  std::unique_ptr<Predictor> trained(const std::string& name, const std::string& yaml = "{}") const {
    const auto& info = predictors().get(name).value;
    Diagnostics d;
    const ParamSet p = read_params(YAML::Load(yaml), info.params, SourceMap("p.yaml"), d);
    EXPECT_TRUE(d.empty()) << d.to_string();
    auto pred = info.make(p);
    pred->setup(context());
    return pred;
  }

  /// Accuracy (1 − ε) over fresh batches 0..3 of every MoE layer, as the runner would ask.
  double live_accuracy(Predictor& pred) const {
    double sum = 0.0;
    int n = 0;
    for (int b = 0; b < 4; ++b)
      for (int l = 0; l < model.num_moe_layers(); ++l, ++n) {
        Rng rng = Rng::derive(kSeed, Stream::kBatchRouting, static_cast<std::uint64_t>(b), static_cast<std::uint64_t>(l), 1);
        sum += 1.0 - pred.forecast(b, l, batch(b, l), rng).error;
      }
    return sum / n;
  }
};

struct Accuracies {
  double probability, token, position;
};

Accuracies held_out(const Bench& bench) {
  return {*bench.trained("probability")->held_out_accuracy(),
          *bench.trained("conditional-probability")->held_out_accuracy(),
          *bench.trained("conditional-probability", "{condition: position}")->held_out_accuracy()};
}

std::string token_routing(double skewness, double affinity, double position_affinity = 0.0) {
  return "{skewness: " + std::to_string(skewness) + ", affinity: " + std::to_string(affinity) +
         ", position_affinity: " + std::to_string(position_affinity) + "}";
}

TEST(TrainedPredictors, RegisteredWithDocumentedOptions) {
  for (const char* name : {"probability", "conditional-probability"}) {
    const auto* e = predictors().find(name);
    ASSERT_NE(e, nullptr) << name;
    for (const auto& spec : e->value.params) EXPECT_FALSE(spec.help.empty()) << name << "." << spec.name;
  }
  const auto& params = predictors().get("conditional-probability").value.params;
  const auto condition = std::find_if(params.begin(), params.end(), [](const ParamSpec& s) { return s.name == "condition"; });
  ASSERT_NE(condition, params.end());
  EXPECT_EQ(condition->default_value, "token");
}

// App. B Eq. 8: every token gets the globally most frequent expert(s).
TEST(TrainedPredictors, ProbabilityPredictsTheGloballyMostFrequentExpert) {
  const Bench top1("skewness", "{skewness: 2.0, hot_expert: 3}", 1);
  auto pred = top1.trained("probability");
  Rng rng(1);
  const LayerRouting truth = top1.batch(0, 1);
  const Forecast f = pred->forecast(0, 1, truth, rng);
  EXPECT_EQ(f.kind, Forecast::Kind::kTokens);
  ASSERT_EQ(f.selection_expert.size(), truth.experts.size());
  for (const auto e : f.selection_expert) ASSERT_EQ(e, 3);
  EXPECT_DOUBLE_EQ(f.expert_share[3], 1.0);
  const auto c = truth.expert_counts();
  EXPECT_NEAR(f.error, 1.0 - static_cast<double>(c[3]) / truth.num_tokens, 1e-12);
  EXPECT_NEAR(*pred->held_out_accuracy(), 2.0 / 8, 0.01);  // the hot expert's share

  // Top-2: the hot expert is in every token's prediction, so it gets exactly half the selections.
  const Bench top2("skewness", "{skewness: 2.0, hot_expert: 3}");
  const Forecast f2 = top2.trained("probability")->forecast(0, 0, top2.batch(0, 0), rng);
  EXPECT_DOUBLE_EQ(f2.expert_share[3], 0.5);
  EXPECT_NEAR(*top2.trained("probability")->held_out_accuracy(), (0.5 + (1 - 0.25) / 7 * 2) / 2, 0.01);
}

TEST(TrainedPredictors, ConditionalBeatsProbabilityOnlyWhenTokensCarryInformation) {
  for (const double s : {1.4, 2.0}) {
    const Accuracies with = held_out(Bench("token-conditioned", token_routing(s, 0.6)));
    const Accuracies without = held_out(Bench("token-conditioned", token_routing(s, 0.0)));
    std::cout << "skewness " << s << " affinity 0.6: probability " << with.probability << ", conditional token "
              << with.token << ", position " << with.position << "; affinity 0: " << without.probability << ", "
              << without.token << ", " << without.position << "\n";
    EXPECT_GT(with.token, with.probability + 0.2) << s;
    EXPECT_NEAR(without.token, without.probability, 0.03) << s;
    // Position conditioning finds nothing when only token ids carry structure.
    EXPECT_LT(with.position, with.token - 0.2) << s;
    EXPECT_NEAR(with.position, with.probability, 0.03) << s;
  }
}

TEST(TrainedPredictors, PositionConditioningLearnsPositionStructure) {
  const Accuracies a = held_out(Bench("token-conditioned", token_routing(1.4, 0.0, 0.6)));
  EXPECT_GT(a.position, a.probability + 0.2);
  EXPECT_GT(a.position, a.token + 0.2);
}

TEST(TrainedPredictors, HeldOutAccuracyPredictsFreshBatches) {
  const Bench bench("token-conditioned", token_routing(1.4, 0.6));
  for (const char* yaml : {"{}", "{condition: position}"}) {
    auto pred = bench.trained("conditional-probability", yaml);
    EXPECT_NEAR(*pred->held_out_accuracy(), bench.live_accuracy(*pred), 0.02) << yaml;
  }
  auto prob = bench.trained("probability");
  EXPECT_NEAR(*prob->held_out_accuracy(), bench.live_accuracy(*prob), 0.02);
}

TEST(TrainedPredictors, TokenConditionFallsBackWithoutTokenIds) {
  const Bench bench("skewness", "{skewness: 1.4}");
  auto prob = bench.trained("probability");
  auto cond = bench.trained("conditional-probability");
  Rng rng(1);
  const LayerRouting truth = bench.batch(2, 1);
  EXPECT_EQ(prob->forecast(2, 1, truth, rng).selection_expert, cond->forecast(2, 1, truth, rng).selection_expert);
  EXPECT_DOUBLE_EQ(*prob->held_out_accuracy(), *cond->held_out_accuracy());
}

TEST(TrainedPredictors, AlignToTruthPutsCorrectExpertsInTheirSlots) {
  const std::int32_t truth[3] = {4, 1, 6};
  std::int32_t p1[3] = {6, 4, 2};  // two right, both in the wrong slots
  EXPECT_EQ(align_to_truth(truth, p1, 3), 2);
  EXPECT_EQ(p1[0], 4);
  EXPECT_EQ(p1[2], 6);
  EXPECT_EQ(p1[1], 2);
  std::int32_t p2[3] = {1, 3, 5};  // stranded in slot 0 unless every slot is searched
  EXPECT_EQ(align_to_truth(truth, p2, 3), 1);
  EXPECT_EQ(p2[1], 1);
  std::int32_t p3[3] = {0, 2, 3};
  EXPECT_EQ(align_to_truth(truth, p3, 3), 0);

  // In a forecast: slot i matches the routing exactly when the token's predicted set holds it.
  const Bench bench("token-conditioned", token_routing(2.0, 0.6));
  auto pred = bench.trained("conditional-probability");
  Rng rng(1);
  const LayerRouting truth_r = bench.batch(1, 0);
  const Forecast f = pred->forecast(1, 0, truth_r, rng);
  std::int64_t correct = 0;
  for (std::int64_t t = 0; t < truth_r.num_tokens; ++t)
    for (int s = 0; s < 2; ++s) {
      const auto* row = &f.selection_expert[static_cast<std::size_t>(t * 2)];
      const bool predicted = row[0] == truth_r.expert(t, s) || row[1] == truth_r.expert(t, s);
      EXPECT_EQ(f.selection_expert[static_cast<std::size_t>(t * 2 + s)] == truth_r.expert(t, s), predicted) << t;
      correct += predicted;
    }
  EXPECT_NEAR(f.error, 1.0 - static_cast<double>(correct) / static_cast<double>(truth_r.experts.size()), 1e-12);
  double share = 0.0;
  for (const double v : f.expert_share) share += v;
  EXPECT_NEAR(share, 1.0, 1e-9);
}

TEST(TrainedPredictors, OptionsReachTheForecastAndRunsRepeat) {
  const Bench bench("token-conditioned", token_routing(1.4, 0.6));
  Rng rng(1);
  const LayerRouting truth = bench.batch(0, 0);
  const Forecast dflt = bench.trained("conditional-probability")->forecast(0, 0, truth, rng);
  EXPECT_EQ(dflt.error_model, ErrorModel::kTypical);
  EXPECT_DOUBLE_EQ(dflt.overhead_ms, 0.005);
  EXPECT_DOUBLE_EQ(bench.trained("probability")->forecast(0, 0, truth, rng).overhead_ms, 0.0);
  const Forecast set = bench.trained("conditional-probability", "{overhead_us: 40, error_model: pessimistic}")
                           ->forecast(0, 0, truth, rng);
  EXPECT_EQ(set.error_model, ErrorModel::kPessimistic);
  EXPECT_DOUBLE_EQ(set.overhead_ms, 0.04);
  EXPECT_EQ(set.selection_expert, dflt.selection_expert);  // deterministic training
  // A larger window trains on more batches: the accuracy can only be measured, not promised,
  // but training must still hold out batches (window 2: one trains, one is held out).
  EXPECT_GT(*bench.trained("conditional-probability", "{window: 2}")->held_out_accuracy(), 0.3);
  EXPECT_FALSE(predictors().get("none").value.make(ParamSet{})->held_out_accuracy().has_value());
}

}  // namespace
}  // namespace moesim
