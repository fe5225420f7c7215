#pragma once
// Shared arithmetic of the expert-load predictors (MoE-GPS §3.2–3.3): expert shares of a
// routing, the distribution error rate, per-selection forecasts and their realised error, the
// `error_model` option, and the token-to-expert accuracy → overhead curve (Fig. 4). Pure
// functions, so predictors and tests use one definition of each quantity.
#include <cstdint>
#include <vector>

#include "models/routing.hpp"
#include "predictors/forecast.hpp"
#include "core/params.hpp"

namespace moesim {

/// Share of the layer's selections each expert received: n_i / N (sums to 1; all zeros when
/// nothing was routed).
std::vector<double> expert_shares(const LayerRouting& routing);

/// Shares n_i / Σn from per-expert counts; uniform 1/E when every count is zero (nothing seen:
/// the maximum-entropy guess).
std::vector<double> shares_of_counts(const std::vector<std::int64_t>& counts);

/// MoE-GPS §3.2.1 error rate of a predicted distribution against an actual one:
/// mean_i |p̂_i − p_i| / (1/E), which is the L1 distance Σ_i |p̂_i − p_i| (in [0, 2]).
/// §3.3 calls the same quantity "averaged L1 distance over number of experts", which we read as
/// this normalisation: the mean absolute error in units of the uniform share 1/E.
double distribution_error_rate(const std::vector<double>& predicted, const std::vector<double>& actual);

/// A per-selection forecast (Forecast::Kind::kTokens) of `truth`: `selection_expert` indexed like
/// truth.experts, expert_share from the predicted selections, and error = the fraction of
/// selections predicted wrongly (MoE-GPS §3.3: ε = 1 − accuracy).
Forecast token_forecast(std::vector<std::int32_t> selection_expert, const LayerRouting& truth,
                        ErrorModel error_model, double overhead_ms);

/// The `error_model` option every predictor with an error declares (MoE-GPS §3.3, Fig. 5).
ParamSpec error_model_param();
/// Reads the `error_model` option of a validated ParamSet.
ErrorModel error_model_of(const ParamSet& params);

/// Token-to-expert overhead per MoE layer as a function of accuracy a and the layer's skewness s
/// (MoE-GPS §3.2.2, Fig. 4): c0 · exp(c1 · a) · (s_ref / s)^γ. MoE-GPS fits exponentials of
/// accuracy to measured predictor overheads; higher skew makes accuracy cheaper. An input model
/// (how costly a predictor of that accuracy is), not a cost model of any kernel.
struct OverheadCurve {
  double c0_ms = 0.0;         ///< overhead at a = 0 and s = s_ref
  double c1 = 0.0;            ///< exponential growth rate in accuracy
  double skew_ref = 1.0;      ///< skewness at which the curve is c0 · exp(c1 · a)
  double skew_exponent = 0.0; ///< γ: how much cheaper accuracy gets as skew rises
  /// The overhead in milliseconds; 0 where nothing was routed (skewness 0: no predictor runs).
  double at(double accuracy, double skewness) const;
};

/// Reorders `predicted` (top_k distinct experts of one token) so that each predicted expert that
/// is among the token's true experts sits in the slot of that true expert: afterwards
/// predicted[s] == truth[s] exactly where slot s is predicted correctly, which is how
/// Forecast::selection_expert is read. Returns the number of correct slots.
int align_to_truth(const std::int32_t* truth, std::int32_t* predicted, int top_k);

}  // namespace moesim
