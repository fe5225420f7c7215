// `distribution-only` (MoE-GPS §3.2.1, App. A): per MoE layer, the maximum-likelihood estimate of
// a multinomial over experts, p̂_i = n_i / N, from the selections of a training window. It says
// how much load each expert will get, never which tokens: a policy can balance compute with it
// but cannot skip the scatter. Estimated offline, it costs nothing online (§4: "Since
// distribution is estimated offline, there is no prediction overhead").
#include <cstdint>
#include <vector>

#include "predictors/estimates.hpp"
#include "predictors/predictor.hpp"

namespace moesim {
namespace {

/// Counts selections per (MoE layer, expert) over the training window and forecasts their
/// shares. Counts accumulate across batches, which is the moving average §3.2.1 describes ("when
/// the training data come as batches, the estimation becomes a moving average"): every selection
/// seen weighs the same, so p̂ after N selections is exactly the App. A estimator.
class DistributionOnlyPredictor final : public Predictor {
 public:
  bool needs_tokens() const override { return false; }
  DistributionOnlyPredictor(int window, bool online, ErrorModel error_model)
      : window_(window), online_(online), error_model_(error_model) {}

  void setup(const PredictorContext& ctx) override {
    const int layers = ctx.model.num_moe_layers();
    counts_.assign(static_cast<std::size_t>(layers),
                   std::vector<std::int64_t>(static_cast<std::size_t>(ctx.model.experts), 0));
    // Without training data (no routing model) the estimate starts uniform (shares_of_counts of
    // zeros) and, with `online`, learns from the batches it observes.
    if (!ctx.training_routing) return;
    for (int l = 0; l < layers; ++l)
      for (int i = 0; i < window_; ++i) add(l, ctx.training_routing(i, l));
  }

  Forecast forecast(int /*batch*/, int moe_layer, const LayerRouting& truth, Rng& /*rng*/) override {
    Forecast f;
    f.kind = Forecast::Kind::kDistribution;
    f.expert_share = shares_of_counts(counts_.at(static_cast<std::size_t>(moe_layer)));
    // The error is measured against the batch the forecast is used on (§3.2.1 measures it
    // against the test set's empirical shares); the estimate itself never sees this batch.
    f.error = distribution_error_rate(f.expert_share, expert_shares(truth));
    f.error_model = error_model_;
    f.overhead_ms = 0.0;  // counting selections is free next to a layer (§4)
    return f;
  }

  bool observes() const override { return online_; }
  void observe(int /*batch*/, int moe_layer, const LayerRouting& truth) override {
    if (online_) add(moe_layer, truth);
  }

 private:
  void add(int moe_layer, const LayerRouting& r) {
    auto& c = counts_.at(static_cast<std::size_t>(moe_layer));
    const std::vector<std::int64_t> n = r.expert_counts();
    for (std::size_t e = 0; e < c.size() && e < n.size(); ++e) c[e] += n[e];
  }

  int window_;
  bool online_;
  ErrorModel error_model_;
  std::vector<std::vector<std::int64_t>> counts_;  ///< [moe_layer][expert] selections seen
};

const bool registered_distribution_only = predictors().add(
    "distribution-only",
    "MoE-GPS §3.2.1: per-layer expert shares p_i = n_i/N (MLE) from a training window; no per-token "
    "information, no online overhead",
    PredictorInfo{{ParamSpec{"window", ParamType::kInt, "8", "batches",
                             "training batches (drawn apart from the simulated ones) the estimate counts", 1.0, 10000.0, {}},
                   ParamSpec{"online", ParamType::kBool, "false", "",
                             "also count every simulated batch after it ran (a moving average over all batches "
                             "seen); false = estimated offline only",
                             {}, {}, {}},
                   error_model_param()},
                  [](const ParamSet& p) {
                    return std::make_unique<DistributionOnlyPredictor>(static_cast<int>(p.get_int("window")),
                                                                       p.get_bool("online"), error_model_of(p));
                  }});

}  // namespace
}  // namespace moesim
