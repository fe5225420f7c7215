// `oracle`: the predictor that knows each layer's routing before attention runs. It bounds what
// any predictor can achieve (MoE-GPS §3.2.2 at accuracy 1, §3.3 with ε = 0) and costs nothing,
// so `oracle` against `none` is the most a policy can gain from prediction, and the gap to a
// real predictor is what its error and overhead cost.
#include "predictors/estimates.hpp"
#include "predictors/predictor.hpp"

namespace moesim {
namespace {

/// Returns the true selections: kind kTokens, the true expert shares, error 0, overhead 0.
class OraclePredictor final : public Predictor {
 public:
  bool observes() const override { return false; }
  Forecast forecast(int /*batch*/, int /*moe_layer*/, const LayerRouting& truth, Rng& /*rng*/) override {
    // token_forecast derives the shares from the selections and measures the error, which is 0
    // here by construction: one definition of both for every per-selection predictor.
    return token_forecast(truth.experts, truth, ErrorModel::kTypical, 0.0);
  }
};

const bool registered_oracle = predictors().add(
    "oracle", "upper bound: the true per-token expert selections before attention, error 0, no overhead",
    PredictorInfo{{}, [](const ParamSet&) { return std::make_unique<OraclePredictor>(); }});

}  // namespace
}  // namespace moesim
