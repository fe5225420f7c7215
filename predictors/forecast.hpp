#pragma once
// What an expert-load predictor tells a policy about one MoE layer of one batch, before that
// layer's attention runs (MoE-GPS §3.1: the predictor sits before attention, so expert copies it
// triggers can overlap attention). Data only: predictors fill it, policies read it.
#include <cstdint>
#include <string>
#include <vector>

namespace moesim {

/// How a prediction's error ε lands on the GPUs (MoE-GPS §3.3, Fig. 5).
enum class ErrorModel : std::uint8_t {
  kOptimistic,   ///< errors leave the load balanced (communication still pays for mispredictions)
  kTypical,      ///< errors spread over GPUs: the most loaded GPU gets (1 + ε)·avg selections
  kPessimistic,  ///< every error on one GPU: it gets avg + ε·total = (1 + G·ε)·avg selections
};
const char* error_model_name(ErrorModel m);
/// Parses "optimistic|typical|pessimistic"; false on an unknown name.
bool parse_error_model(const std::string& s, ErrorModel& out);

/// One layer's forecast.
struct Forecast {
  enum class Kind : std::uint8_t {
    kNone,          ///< nothing known before routing: a policy can only react after the router
    kDistribution,  ///< per-expert shares only (which tokens go where is unknown)
    kTokens,        ///< per-selection predicted expert
  };
  Kind kind = Kind::kNone;
  /// kDistribution, kTokens: predicted share of the layer's selections per expert (sums to 1).
  std::vector<double> expert_share;
  /// kTokens: predicted expert of each selection, indexed like LayerRouting::experts
  /// (token t, slot s at t·top_k + s); a selection is predicted correctly where it equals the
  /// routing's expert.
  std::vector<std::int32_t> selection_expert;
  /// ε: for kDistribution the error rate mean_i |p̂_i − p_i| / (1/E) against this batch's routing;
  /// for kTokens 1 − accuracy (the fraction of selections predicted wrongly). 0 for an oracle.
  double error = 0.0;
  ErrorModel error_model = ErrorModel::kTypical;
  /// Online cost of producing the forecast, per layer, in milliseconds (0 for offline estimates).
  /// The batch planner spends it on every GPU before the layer's attention.
  double overhead_ms = 0.0;
};

}  // namespace moesim
