#include "predictors/predictor.hpp"

namespace moesim {

Registry<PredictorInfo>& predictors() {
  static Registry<PredictorInfo> registry("predictor");
  return registry;
}

namespace {
const bool registered_none = predictors().add(
    "none", "no prediction: the policy sees the routing only when the router has run", PredictorInfo{{}});
}  // namespace

}  // namespace moesim
