#pragma once
// Expert-load predictors (MoE-GPS §3.2–3.3). A predictor tells a policy, before routing, what the
// expert load (or per-token placement) of a layer will be, at some overhead and error.
#include <functional>
#include <string>
#include <vector>

#include "sim/params.hpp"
#include "sim/registry.hpp"

namespace moesim {

/// Registry entry: declared options. `none` is the only predictor so far: the policy sees
/// nothing before routing, so it can only act on the routing it is handed.
struct PredictorInfo {
  std::vector<ParamSpec> params;
};
Registry<PredictorInfo>& predictors();

}  // namespace moesim
