#include "predictors/estimates.hpp"

#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace moesim {

std::vector<double> shares_of_counts(const std::vector<std::int64_t>& counts) {
  const double total = static_cast<double>(std::accumulate(counts.begin(), counts.end(), std::int64_t{0}));
  std::vector<double> out(counts.size(), counts.empty() ? 0.0 : 1.0 / static_cast<double>(counts.size()));
  if (total <= 0.0) return out;
  for (std::size_t i = 0; i < counts.size(); ++i) out[i] = static_cast<double>(counts[i]) / total;
  return out;
}

std::vector<double> expert_shares(const LayerRouting& routing) {
  if (routing.experts.empty()) return std::vector<double>(static_cast<std::size_t>(routing.num_experts), 0.0);
  return shares_of_counts(routing.expert_counts());
}

double distribution_error_rate(const std::vector<double>& predicted, const std::vector<double>& actual) {
  if (predicted.size() != actual.size())
    throw std::invalid_argument("distribution_error_rate: " + std::to_string(predicted.size()) + " predicted vs " +
                                std::to_string(actual.size()) + " actual shares");
  // mean_i |p̂_i − p_i| / (1/E) = (Σ_i |p̂_i − p_i| / E) · E = Σ_i |p̂_i − p_i|.
  double l1 = 0.0;
  for (std::size_t i = 0; i < predicted.size(); ++i) l1 += std::abs(predicted[i] - actual[i]);
  return l1;
}

Forecast token_forecast(std::vector<std::int32_t> selection_expert, const LayerRouting& truth,
                        ErrorModel error_model, double overhead_ms) {
  if (selection_expert.size() != truth.experts.size())
    throw std::invalid_argument("token_forecast: one predicted expert per selection expected");
  Forecast f;
  f.kind = Forecast::Kind::kTokens;
  std::vector<std::int64_t> counts(static_cast<std::size_t>(truth.num_experts), 0);
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < selection_expert.size(); ++i) {
    const std::int32_t e = selection_expert[i];
    if (e < 0 || e >= truth.num_experts) throw std::invalid_argument("token_forecast: expert out of range");
    ++counts[static_cast<std::size_t>(e)];
    wrong += e != truth.experts[i] ? 1 : 0;
  }
  f.expert_share = selection_expert.empty() ? std::vector<double>(counts.size(), 0.0) : shares_of_counts(counts);
  f.selection_expert = std::move(selection_expert);
  f.error = f.selection_expert.empty()
                ? 0.0
                : static_cast<double>(wrong) / static_cast<double>(f.selection_expert.size());
  f.error_model = error_model;
  f.overhead_ms = overhead_ms;
  return f;
}

ParamSpec error_model_param() {
  return ParamSpec{"error_model", ParamType::kString, "typical", "",
                   "how the prediction error lands on GPUs (MoE-GPS §3.3 Fig. 5): optimistic = still balanced, "
                   "typical = busiest GPU gets (1+eps)x avg, pessimistic = all errors on one GPU",
                   {}, {}, {"optimistic", "typical", "pessimistic"}};
}

ErrorModel error_model_of(const ParamSet& params) {
  ErrorModel m = ErrorModel::kTypical;
  if (!parse_error_model(params.get_string("error_model"), m))
    throw std::logic_error("error_model_of: unvalidated error_model '" + params.get_string("error_model") + "'");
  return m;
}

double OverheadCurve::at(double accuracy, double skewness) const {
  if (skewness <= 0.0) return 0.0;
  return c0_ms * std::exp(c1 * accuracy) * std::pow(skew_ref / skewness, skew_exponent);
}

}  // namespace moesim
