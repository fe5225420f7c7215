// Trained frequency predictors of MoE-GPS §3.2.2 and App. B, registered as `probability` (every
// token gets the experts most frequent in the training data, Eq. 7–8) and
// `conditional-probability` (the experts most frequent for the token's vocabulary id or its
// position in the sequence, Eq. 9–10). Both train at setup on the predictor's training window
// with MoE-GPS §3.2's 80/20 split, keep the held-out accuracy, and forecast per selection.
#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "predictors/estimates.hpp"
#include "predictors/predictor.hpp"

namespace moesim {

int align_to_truth(const std::int32_t* truth, std::int32_t* predicted, int top_k) {
  // A swap only moves a misplaced expert out of slot s and into a slot that was wrong too (the
  // true experts are distinct), so correct slots never get undone. O(k²), no allocation.
  int correct = 0;
  for (int s = 0; s < top_k; ++s) {
    if (predicted[s] == truth[s]) {
      ++correct;
      continue;
    }
    for (int j = 0; j < top_k; ++j)
      if (j != s && predicted[j] == truth[s]) {
        std::swap(predicted[s], predicted[j]);
        ++correct;
        break;
      }
  }
  return correct;
}

namespace {

/// What a conditional model keys its counts by (MoE-GPS App. B: "token index or its absolute
/// position in the sequence"); kNone is the global probability model.
enum class Condition : std::uint8_t { kNone, kToken, kPosition };

/// One MoE layer's trained rule: the top-k experts overall (Eq. 8 for k = 1) and per key (Eq. 10).
struct LayerRule {
  std::vector<std::int32_t> global;
  std::unordered_map<std::int64_t, std::size_t> row;  ///< key → its row in `by_key`
  std::vector<std::int32_t> by_key;                   ///< top_k experts per seen key

  /// The prediction for a key; unseen keys (and key -1: no key) fall back to the global one.
  const std::int32_t* predict(std::int64_t key) const {
    if (key >= 0)
      if (const auto it = row.find(key); it != row.end()) return &by_key[it->second * global.size()];
    return global.data();
  }
};

/// The `top_k` experts with the highest `counts`; ties go to the globally more frequent expert,
/// then to the lower id, so training is deterministic.
std::vector<std::int32_t> most_frequent(const std::vector<std::int64_t>& counts, const std::vector<std::int64_t>& global,
                                        int top_k) {
  std::vector<std::int32_t> order(counts.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(i);
  std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](std::int32_t a, std::int32_t b) {
    if (counts[a] != counts[b]) return counts[a] > counts[b];
    if (global[a] != global[b]) return global[a] > global[b];
    return a < b;
  });
  order.resize(static_cast<std::size_t>(top_k));
  return order;
}

/// MoE-GPS App. B frequency predictors. Training counts expert selections in the first 80% of
/// the window's batches (globally or per key) and keeps the top-k; the last 20% are held out to
/// measure accuracy, as MoE-GPS §3.2 splits datasets without a test split. Splitting by batch
/// rather than by token keeps held-out tokens from sharing a batch (and its ids) with training.
class TrainedPredictor final : public Predictor {
 public:
  TrainedPredictor(Condition condition, int window, double overhead_us, ErrorModel error_model)
      : condition_(condition), window_(window), overhead_us_(overhead_us), error_model_(error_model) {}

  bool observes() const override { return false; }

  /// Trains one rule per MoE layer on the first round(0.8·window) batches of the training window
  /// (at least one, leaving at least one) and measures accuracy on the rest.
  void setup(const PredictorContext& ctx) override {
    if (!ctx.training_routing)
      throw std::logic_error("trained predictors need PredictorContext::training_routing");
    top_k_ = ctx.model.top_k;
    experts_ = ctx.model.experts;
    seq_len_ = ctx.workload.seq_len;
    const int train = std::clamp(static_cast<int>(std::lround(0.8 * window_)), 1, window_ - 1);
    rules_.clear();
    std::int64_t correct = 0, selections = 0;
    for (int l = 0; l < ctx.model.num_moe_layers(); ++l) {
      std::vector<LayerRouting> batches;
      for (int i = 0; i < window_; ++i) batches.push_back(ctx.training_routing(i, l));
      rules_.push_back(train_layer(batches.data(), batches.data() + train));
      for (int i = train; i < window_; ++i) {
        const LayerRouting& r = batches[static_cast<std::size_t>(i)];
        correct += predict(rules_.back(), r, nullptr);
        selections += r.num_tokens * r.top_k;
      }
    }
    held_out_accuracy_ = selections > 0 ? static_cast<double>(correct) / static_cast<double>(selections) : 0.0;
  }

  /// Per-selection forecast (kTokens) aligned to `truth`'s slots; `truth` is read only to measure
  /// this batch's ε, never to choose a prediction.
  Forecast forecast(int /*batch*/, int moe_layer, const LayerRouting& truth, Rng& /*rng*/) override {
    if (moe_layer < 0 || moe_layer >= static_cast<int>(rules_.size()))
      throw std::logic_error("trained predictor: no rule for MoE layer " + std::to_string(moe_layer) +
                             " (was setup called?)");
    std::vector<std::int32_t> predicted(truth.experts.size());
    predict(rules_[static_cast<std::size_t>(moe_layer)], truth, predicted.data());
    // MoE-GPS §3.3: ε = 1 − accuracy for Token-to-Expert Prediction, here against this batch
    // (the predictions are aligned to the true slots, so a mismatch is a wrong prediction).
    return token_forecast(std::move(predicted), truth, error_model_, overhead_us_ / 1000.0);
  }

  /// Fraction of the held-out selections predicted correctly, over every MoE layer.
  std::optional<double> held_out_accuracy() const override { return held_out_accuracy_; }

 private:
  /// The key a token's counts are kept under: its vocabulary id or its position (t mod seq_len);
  /// -1 (use the global rule) for the probability model, or when the routing has no token ids.
  std::int64_t key(const LayerRouting& r, std::int64_t t) const {
    switch (condition_) {
      case Condition::kToken: return r.has_token_ids() ? r.token_ids[static_cast<std::size_t>(t)] : -1;
      case Condition::kPosition: return token_position(t, seq_len_);
      case Condition::kNone: break;
    }
    return -1;
  }

  /// Counts selections of the training batches [first, last), globally and per key.
  LayerRule train_layer(const LayerRouting* first, const LayerRouting* last) const {
    std::vector<std::int64_t> global(static_cast<std::size_t>(experts_), 0);
    std::unordered_map<std::int64_t, std::vector<std::int64_t>> by_key;
    for (const LayerRouting* r = first; r != last; ++r) {
      check(*r);
      for (std::int64_t t = 0; t < r->num_tokens; ++t) {
        const std::int64_t k = key(*r, t);
        std::vector<std::int64_t>* counts = nullptr;
        if (k >= 0) {
          auto& c = by_key[k];
          if (c.empty()) c.assign(static_cast<std::size_t>(experts_), 0);
          counts = &c;
        }
        for (int s = 0; s < top_k_; ++s) {
          const auto e = static_cast<std::size_t>(r->expert(t, s));
          ++global[e];
          if (counts) ++(*counts)[e];
        }
      }
    }
    LayerRule rule;
    rule.global = most_frequent(global, global, top_k_);  // App. B Eq. 7–8
    rule.by_key.reserve(by_key.size() * static_cast<std::size_t>(top_k_));
    for (const auto& [k, counts] : by_key) {  // App. B Eq. 9–10
      rule.row.emplace(k, rule.row.size());
      const auto top = most_frequent(counts, global, top_k_);
      rule.by_key.insert(rule.by_key.end(), top.begin(), top.end());
    }
    return rule;
  }

  /// Predicts every selection of `r`, aligned to its slots (align_to_truth), into `out` (or a
  /// scratch buffer when null). Returns the number of correct selections.
  std::int64_t predict(const LayerRule& rule, const LayerRouting& r, std::int32_t* out) const {
    check(r);
    std::vector<std::int32_t> scratch(out ? 0 : static_cast<std::size_t>(top_k_));
    std::int64_t correct = 0;
    for (std::int64_t t = 0; t < r.num_tokens; ++t) {
      std::int32_t* slot = out ? out + t * top_k_ : scratch.data();
      std::copy_n(rule.predict(key(r, t)), top_k_, slot);
      correct += align_to_truth(&r.experts[static_cast<std::size_t>(t * top_k_)], slot, top_k_);
    }
    return correct;
  }

  /// Routing of another shape than the model's is a wiring error, not a user's.
  void check(const LayerRouting& r) const {
    if (r.top_k != top_k_ || r.num_experts != experts_)
      throw std::logic_error("trained predictor: routing has top-" + std::to_string(r.top_k) + " of " +
                             std::to_string(r.num_experts) + " experts, the model top-" + std::to_string(top_k_) +
                             " of " + std::to_string(experts_));
  }

  Condition condition_;
  int window_;
  double overhead_us_;
  ErrorModel error_model_;
  int top_k_ = 1;
  int experts_ = 0;
  std::int64_t seq_len_ = 0;
  std::vector<LayerRule> rules_;  ///< per MoE layer
  double held_out_accuracy_ = 0.0;
};

/// MoE-GPS §3.2's 80/20 split needs at least two batches.
ParamSpec window_param() {
  return ParamSpec{"window", ParamType::kInt, "16", "batches",
                   "training batches per MoE layer; the first 80% train, the last 20% are held out", 2.0, 10000.0, {}};
}

[[maybe_unused]] const bool registered_probability = predictors().add(
    "probability",
    "MoE-GPS App. B probability model: every token gets the top-k experts most frequent in training",
    PredictorInfo{{window_param(),
                   ParamSpec{"overhead_us", ParamType::kFloat, "0", "us",
                             "online cost per MoE layer: 0, the prediction is one constant computed offline",
                             0.0, 1e6, {}},
                   error_model_param()},
                  [](const ParamSet& p) {
                    return std::make_unique<TrainedPredictor>(Condition::kNone, static_cast<int>(p.get_int("window")),
                                                              p.get_float("overhead_us"), error_model_of(p));
                  }});

[[maybe_unused]] const bool registered_conditional = predictors().add(
    "conditional-probability",
    "MoE-GPS App. B conditional probability model: the top-k experts most frequent for the token's id or position",
    PredictorInfo{{window_param(),
                   ParamSpec{"condition", ParamType::kString, "token", "",
                             "key of the counts: the token's vocabulary id, or its position (t mod seq_len)",
                             {}, {}, {"token", "position"}},
                   ParamSpec{"overhead_us", ParamType::kFloat, "5", "us",
                             "online cost per MoE layer: one gather kernel looking up each token's key in a "
                             "table (launch-bound, a few microseconds)",
                             0.0, 1e6, {}},
                   error_model_param()},
                  [](const ParamSet& p) {
                    const Condition c = p.get_string("condition") == "position" ? Condition::kPosition : Condition::kToken;
                    return std::make_unique<TrainedPredictor>(c, static_cast<int>(p.get_int("window")),
                                                              p.get_float("overhead_us"), error_model_of(p));
                  }});

}  // namespace


}  // namespace moesim
