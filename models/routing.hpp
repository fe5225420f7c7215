#pragma once
// Routing models: which experts each token selects in each MoE layer of each batch. Seeded and
// registered by name. Most models define a per-expert distribution p (shares of all selections)
// and draw top-k distinct experts per token whose inclusion probabilities match k·p.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/params.hpp"
#include "core/registry.hpp"
#include "core/rng.hpp"

namespace moesim {

/// The routing of one MoE layer for one batch: `top_k` distinct experts per token.
/// A batch is `batch_size` sequences laid end to end, so token t sits at position
/// t mod seq_len of its sequence (token_position).
struct LayerRouting {
  std::int64_t num_tokens = 0;
  int top_k = 1;
  int num_experts = 0;
  std::vector<std::int32_t> experts;  ///< token t's selections at [t*top_k, (t+1)*top_k)
  /// Vocabulary id of token t at [t], the same in every MoE layer of a batch. Empty when the
  /// routing model does not model token identities (every model but `token-conditioned`): the
  /// real routing data we have holds per-expert counts only, so identities are synthesised.
  /// MoE-GPS App. B's conditional-probability predictor conditions on them.
  std::vector<std::int32_t> token_ids;

  std::int32_t expert(std::int64_t token, int slot) const { return experts[token * top_k + slot]; }
  /// Selections per expert.
  std::vector<std::int64_t> expert_counts() const;
  /// MoE-GPS skewness: max selections on one expert / mean selections per expert.
  double skewness() const;
  bool has_token_ids() const { return !token_ids.empty(); }
};

/// Position of token `token` in its sequence: token mod seq_len; the batch index itself when
/// seq_len <= 0 (unknown: the batch is taken as one sequence).
inline std::int64_t token_position(std::int64_t token, std::int64_t seq_len) {
  return seq_len > 0 ? token % seq_len : token;
}

/// A token of a serving step: the request (sequence) it belongs to and its position there.
struct TokenRef {
  std::int64_t sequence = 0;
  std::int64_t position = 0;
};

/// What a routing model needs to know about the model and workload.
struct RoutingContext {
  int experts = 0;
  int top_k = 1;
  int moe_layers = 0;
  int batches = 1;
  std::string model_name;   ///< preset name, for trace row selection defaults
  std::string base_dir;     ///< directory of the scenario file, for relative trace paths
  std::uint64_t seed = 0;   ///< scenario seed, for choices fixed once per run (random hot sets)
  /// Tokens per sequence (the workload's seq_len), for models with position structure
  /// (`token-conditioned`'s position_affinity). 0 = unknown; the runner fills it.
  std::int64_t seq_len = 0;
};

/// Base class. Subclasses override `distribution` (or `route` for non-distribution models).
class RoutingModel {
 public:
  virtual ~RoutingModel() = default;
  /// Share of all selections each expert receives at (batch, moe_layer); sums to 1.
  /// `rng` is the (batch, layer) stream, for models whose skew itself is random.
  virtual std::vector<double> distribution(int batch, int moe_layer, Rng& rng) const = 0;
  /// Draws the routing of `tokens` tokens. Default: systematic sampling with inclusion
  /// probabilities min(1, k·p_i) (renormalised), so each token gets k distinct experts and
  /// expert shares match p whenever k·p_i <= 1.
  virtual LayerRouting route(int batch, int moe_layer, std::int64_t tokens, Rng& rng) const;
  /// Routes a serving step's tokens, knowing which request and position each token is. Models
  /// without token identities ignore them (the default: route(step, layer, tokens.size(), rng));
  /// `token-conditioned` keeps a request's token ids across its steps.
  virtual LayerRouting route_tokens(int step, int moe_layer, const std::vector<TokenRef>& tokens, Rng& rng) const {
    return route(step, moe_layer, static_cast<std::int64_t>(tokens.size()), rng);
  }

 protected:
  explicit RoutingModel(RoutingContext ctx) : ctx_(std::move(ctx)) {}
  RoutingContext ctx_;
};

/// Registry entry: declared options and a factory. Factories may throw InputError for
/// problems they detect (e.g. a trace file with no matching rows), located at `where`.
struct RoutingModelInfo {
  std::vector<ParamSpec> params;
  std::function<std::unique_ptr<RoutingModel>(const ParamSet&, const RoutingContext&,
                                              const SourceLocation& where)>
      make;
};
Registry<RoutingModelInfo>& routing_models();

/// Turns per-expert shares into per-token inclusion probabilities (sum k, each <= 1).
std::vector<double> inclusion_probabilities(const std::vector<double>& p, int top_k);

/// Systematic (Madow) sampling of `tokens` tokens, each selecting round(sum(pi)) distinct
/// experts with inclusion probabilities `pi` (each <= 1, e.g. from inclusion_probabilities).
/// The expert order is reshuffled with `rng` every 256 tokens (so co-selected pairs vary); then
/// one uniform draw per token.
LayerRouting systematic_sample(const std::vector<double>& pi, int top_k, std::int64_t tokens, Rng& rng);

/// A routing model whose distribution depends only on the MoE layer: `rows[moe_layer % rows]`.
/// One row gives the same distribution everywhere (uniform, skewed, zipf, ...); several rows
/// cycle through per-layer shares (e.g. a trace's layers).
class TableRoutingModel : public RoutingModel {
 public:
  TableRoutingModel(RoutingContext ctx, std::vector<std::vector<double>> rows);
  std::vector<double> distribution(int batch, int moe_layer, Rng& rng) const override;
  const std::vector<std::vector<double>>& rows() const { return rows_; }

 private:
  std::vector<std::vector<double>> rows_;
};

}  // namespace moesim
