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

  /// Count-level form (issue 13's count-level routing): `experts` and `token_ids` are empty and
  /// `counts[g * num_experts + e]` holds the selections of expert e by the tokens of source GPU g,
  /// for `sources` sources laid out in order (the tokens of source 0 first, as token_home is).
  std::vector<std::int64_t> counts;
  int sources = 0;
  bool by_count = false;

  std::int32_t expert(std::int64_t token, int slot) const { return experts[token * top_k + slot]; }
  /// Selections per expert.
  std::vector<std::int64_t> expert_counts() const;
  /// MoE-GPS skewness: max selections on one expert / mean selections per expert.
  double skewness() const;
  bool has_token_ids() const { return !token_ids.empty(); }
};

/// Calls f(source GPU, expert, n) for the selections of `r`: in token order, one selection at a
/// time (n = 1), for a token-level routing (`token_home[t]`: token t's GPU); per (source, expert)
/// in source order for a count-level one. Tokens are laid out source by source, so any state
/// kept per expert (quotas, capacities) sees the selections of each expert in the same order
/// either way, and per-(source, expert) totals are identical.
template <typename F>
void for_each_selection(const LayerRouting& r, const std::vector<int>& token_home, F&& f) {
  if (r.by_count) {
    for (int g = 0; g < r.sources; ++g)
      for (int e = 0; e < r.num_experts; ++e) {
        const std::int64_t n = r.counts[static_cast<std::size_t>(g) * static_cast<std::size_t>(r.num_experts) + static_cast<std::size_t>(e)];
        if (n > 0) f(g, e, n);
      }
    return;
  }
  for (std::int64_t t = 0; t < r.num_tokens; ++t)
    for (int s = 0; s < r.top_k; ++s) f(token_home[static_cast<std::size_t>(t)], r.expert(t, s), std::int64_t{1});
}

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
  /// Count-level routing: how many selections the tokens of each source GPU (`tokens[g]` of
  /// them) make of each expert, drawn directly in O(sources · E log E) (see count_sample); the
  /// same per-expert marginals as route()'s token draws. Models whose token structure matters
  /// (`token-conditioned`) return false from supports_counts() and are always routed by token.
  virtual LayerRouting route_counts(int batch, int moe_layer, const std::vector<std::int64_t>& tokens, Rng& rng) const;
  virtual bool supports_counts() const { return true; }

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

/// Count-level counterpart of systematic_sample: for each source g, the selections of its
/// `tokens[g]` tokens per expert. Systematic sampling maps each token's uniform u to a k-subset
/// that is constant on the segments between the fractional parts of the cumulative inclusion
/// probabilities; so the tokens of a source fall into those segments multinomially (segment
/// lengths as probabilities), and each segment adds its subset. Every expert's count is then
/// Binomial(tokens, π_e) as with token draws, and each source's counts sum to tokens · k. The
/// multinomial uses exact binomial inversion for small means and a rounded normal for large
/// ones (mean and variance both ≥ 20 away from the bounds), where the two are indistinguishable.
LayerRouting count_sample(const std::vector<double>& pi, int top_k, const std::vector<std::int64_t>& tokens, Rng& rng);
/// Binomial(n, p) draw (inversion for small means, rounded normal otherwise; see count_sample).
std::int64_t binomial_draw(std::int64_t n, double p, Rng& rng);

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
