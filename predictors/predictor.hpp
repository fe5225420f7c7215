#pragma once
// Expert-load predictors (MoE-GPS §3.2–3.3). A predictor tells a policy, before a layer's
// attention, what that layer's expert load (or per-token placement) will be, at some overhead and
// error. Predictors register by name with their declared options, as policies do.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/model_spec.hpp"
#include "models/routing.hpp"
#include "models/workload.hpp"
#include "predictors/forecast.hpp"
#include "core/params.hpp"
#include "core/registry.hpp"
#include "core/rng.hpp"

namespace moesim {

/// What a predictor may look at.
struct PredictorContext {
  const ModelSpec& model;
  const PrefillWorkload& workload;
  int gpus = 1;
  /// Routing of training batches, drawn from streams apart from the simulated batches:
  /// `training_routing(i, moe_layer)` for i = 0, 1, ... (the offline training window).
  std::function<LayerRouting(int batch, int moe_layer)> training_routing = {};
};

/// Base class of all predictors. `forecast` is called for every MoE layer of every batch before
/// the batch is planned; `observe` afterwards with the same routing, so online estimates can
/// learn from what they have seen (moving averages).
class Predictor {
 public:
  virtual ~Predictor() = default;
  /// Offline work (training on the training window). Default: nothing.
  virtual void setup(const PredictorContext& ctx);
  /// The forecast for `moe_layer` of `batch`. `truth` is the layer's actual routing: an oracle
  /// returns it; other predictors use it only to measure their own error against it and, for
  /// accuracy-parameterised predictors, to draw which selections they get right (`rng` is a
  /// stream of this (batch, layer)).
  virtual Forecast forecast(int batch, int moe_layer, const LayerRouting& truth, Rng& rng) = 0;
  /// Learns from the routing of a finished batch's layer. Default: nothing.
  virtual void observe(int batch, int moe_layer, const LayerRouting& truth);
  /// False when observe() learns nothing, so a run need not keep a batch's routings until the
  /// batch has finished (a batch of a large cluster holds one per MoE layer). Default: true.
  virtual bool observes() const { return true; }
  /// For predictors trained on a split of the training window: the fraction of held-out
  /// selections predicted correctly (MoE-GPS §3.2.2, App. B). Default: none.
  virtual std::optional<double> held_out_accuracy() const;
  /// True (the default) when forecasts or training look at individual tokens' selections, so
  /// layers must be routed token by token; false when per-expert counts suffice.
  virtual bool needs_tokens() const { return true; }
};

/// Registry entry: declared options and a factory.
struct PredictorInfo {
  std::vector<ParamSpec> params;
  std::function<std::unique_ptr<Predictor>(const ParamSet&)> make;
};
Registry<PredictorInfo>& predictors();

}  // namespace moesim
