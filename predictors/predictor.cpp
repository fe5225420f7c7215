#include "predictors/predictor.hpp"

namespace moesim {

Registry<PredictorInfo>& predictors() {
  static Registry<PredictorInfo> registry("predictor");
  return registry;
}

void Predictor::setup(const PredictorContext& /*ctx*/) {}
void Predictor::observe(int /*batch*/, int /*moe_layer*/, const LayerRouting& /*truth*/) {}
std::optional<double> Predictor::held_out_accuracy() const { return std::nullopt; }

const char* error_model_name(ErrorModel m) {
  switch (m) {
    case ErrorModel::kOptimistic: return "optimistic";
    case ErrorModel::kTypical: return "typical";
    case ErrorModel::kPessimistic: return "pessimistic";
  }
  return "?";
}

bool parse_error_model(const std::string& s, ErrorModel& out) {
  if (s == "optimistic") out = ErrorModel::kOptimistic;
  else if (s == "typical") out = ErrorModel::kTypical;
  else if (s == "pessimistic") out = ErrorModel::kPessimistic;
  else return false;
  return true;
}

namespace {

/// MoE-GPS "no prediction": the policy sees the routing only when the router has run.
class NoPrediction final : public Predictor {
 public:
  bool needs_tokens() const override { return false; }
  bool observes() const override { return false; }
  Forecast forecast(int /*batch*/, int /*moe_layer*/, const LayerRouting& /*truth*/, Rng& /*rng*/) override {
    return Forecast{};
  }
};

const bool registered_none = predictors().add(
    "none", "no prediction: the policy sees the routing only when the router has run",
    PredictorInfo{{}, [](const ParamSet&) { return std::make_unique<NoPrediction>(); }});

}  // namespace
}  // namespace moesim
