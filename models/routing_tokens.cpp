// The `token-conditioned` routing model: routing with token identities. The routing data we have
// (shared/data/routing) holds per-expert counts only, so MoE-GPS App. B's conditional-probability
// predictor (argmax expert per token index or position) has nothing to learn from it. This model
// synthesises the missing structure: every token carries a vocabulary id drawn from a Zipf law,
// and each (MoE layer, id) prefers a fixed set of experts, so tokens with the same id tend to route
// alike while the aggregate expert shares still follow MoE-GPS §2's target skewness.
#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>

#include "models/routing.hpp"

namespace moesim {
namespace {

// Streams (core/rng_streams.hpp): token ids are keyed by the batch only (the same in every
// layer), or in serving by (request, position); preferences are keyed by the layer only (the
// same in every batch). All apart from the (batch, layer) routing streams.
// The heaviest items get their preferred sets one by one against the shares still owed (see
// preferred_sets); the rest are light enough to be drawn together.
constexpr std::size_t kExactHead = 1024;

std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

/// MoE-GPS §2 target skewness with one hot expert, as the `skewness` model: expert `hot` gets
/// s/E of all selections and the others share the rest evenly.
std::vector<double> skewness_shares(int experts, double s, int hot) {
  const double e = static_cast<double>(experts);
  if (experts == 1) return {1.0};
  std::vector<double> p(static_cast<std::size_t>(experts), (1.0 - s / e) / (e - 1.0));
  p[static_cast<std::size_t>(hot)] = s / e;
  return p;
}

/// Item masses of a Zipf(s) law over `vocab` ids: id r (its frequency rank) has mass ∝ (r+1)^-s.
std::vector<double> zipf_masses(std::int64_t vocab, double s) {
  std::vector<double> m(static_cast<std::size_t>(vocab));
  double sum = 0.0;
  for (std::int64_t r = 0; r < vocab; ++r) sum += (m[static_cast<std::size_t>(r)] = std::pow(r + 1.0, -s));
  for (double& v : m) v /= sum;
  return m;
}

/// Preferred top-k sets for items of the given masses (sorted heaviest first, summing to 1), such
/// that the mass of items preferring expert i is close to pi_i (inclusion probabilities, sum k):
/// then tokens that follow their item's preference still load the experts as p. Independent
/// draws would miss this by the weight of the heaviest items (a Zipf(1.1) head id alone carries
/// 14% of the tokens), so the heaviest kExactHead items draw one at a time from the shares still
/// owed to each expert, skipping experts owed less than the item weighs (while k others can take
/// it) so that none is overpaid, and the light tail draws together from what is left, which it
/// matches to within its own sampling noise. With Mixtral's 8 experts, top-2 and a 32000-id
/// Zipf(1.1) vocabulary, the resulting shares are within 0.002 of p over 200 seeds.
std::vector<std::uint16_t> preferred_sets(const std::vector<double>& mass, const std::vector<double>& pi, int k,
                                          Rng& rng) {
  const std::size_t n = mass.size();
  std::vector<std::uint16_t> sets(n * static_cast<std::size_t>(k));
  std::vector<double> owed = pi;  // inclusion mass each expert still has to receive
  const auto owed_inclusion = [&](double weight) {
    std::vector<double> q(owed.size());
    int affordable = 0;
    for (std::size_t i = 0; i < q.size(); ++i) {
      q[i] = std::max(owed[i], 0.0);
      affordable += q[i] >= weight ? 1 : 0;
    }
    if (affordable >= k)
      for (double& v : q)
        if (v < weight) v = 0.0;
    if (std::all_of(q.begin(), q.end(), [](double v) { return v <= 0.0; })) q = pi;  // rounding left nothing
    return inclusion_probabilities(q, k);
  };
  const auto store = [&](const LayerRouting& drawn, std::size_t first) {
    for (std::size_t j = 0; j < static_cast<std::size_t>(drawn.num_tokens); ++j)
      for (int s = 0; s < k; ++s) {
        const std::int32_t e = drawn.expert(static_cast<std::int64_t>(j), s);
        sets[(first + j) * static_cast<std::size_t>(k) + static_cast<std::size_t>(s)] = static_cast<std::uint16_t>(e);
        owed[static_cast<std::size_t>(e)] -= mass[first + j];
      }
  };
  const std::size_t head = std::min(n, kExactHead);
  for (std::size_t j = 0; j < head; ++j) store(systematic_sample(owed_inclusion(mass[j]), k, 1, rng), j);
  if (head < n) store(systematic_sample(owed_inclusion(0.0), k, static_cast<std::int64_t>(n - head), rng), head);
  return sets;
}

/// Tokens carry Zipf-distributed vocabulary ids; with probability `affinity` a token takes its
/// (layer, id)'s preferred experts, with probability `position_affinity` its (layer, position)'s,
/// otherwise k distinct experts drawn from p by systematic sampling. Preferences are fixed by
/// the seed and built per layer on first use (a vocabulary-sized table per layer).
class TokenConditionedRouting final : public RoutingModel {
 public:
  struct Options {
    std::int64_t vocab = 32000;
    double zipf_s = 1.1;
    double skewness = 2.0;
    int hot_expert = 0;
    double affinity = 0.6;
    double position_affinity = 0.0;
  };

  TokenConditionedRouting(RoutingContext ctx, Options o)
      : RoutingModel(std::move(ctx)),
        o_(o),
        p_(skewness_shares(ctx_.experts, o.skewness, o.hot_expert)),
        pi_(inclusion_probabilities(p_, ctx_.top_k)),
        zipf_cdf_(zipf_masses(o.vocab, o.zipf_s)),
        layers_(static_cast<std::size_t>(std::max(1, ctx_.moe_layers))),
        id_once_(std::make_unique<std::once_flag[]>(layers_)),
        position_once_(std::make_unique<std::once_flag[]>(layers_)),
        id_sets_(layers_),
        position_sets_(layers_) {
    for (std::size_t r = 1; r < zipf_cdf_.size(); ++r) zipf_cdf_[r] += zipf_cdf_[r - 1];
    zipf_cdf_.back() = 1.0;
  }

  /// Token identities are the point of this model: it is always routed token by token.
  bool supports_counts() const override { return false; }

  /// The aggregate shares: preferences are built to follow p, so p is every layer's distribution.
  std::vector<double> distribution(int /*batch*/, int /*moe_layer*/, Rng& /*rng*/) const override { return p_; }

  /// Token ids come from the batch's id stream; which source each token follows, and the free
  /// tokens' experts, from `rng` (the (batch, layer) stream).
  LayerRouting route(int batch, int moe_layer, std::int64_t tokens, Rng& rng) const override {
    std::vector<std::int64_t> positions(static_cast<std::size_t>(tokens));
    for (std::int64_t t = 0; t < tokens; ++t) positions[static_cast<std::size_t>(t)] = token_position(t, ctx_.seq_len);
    return route_ids(moe_layer, token_ids(batch, tokens), positions, rng);
  }

  /// Serving steps: token (request r, position p) has the id drawn from a stream keyed by (r, p)
  /// alone, so a request keeps its token identities across steps (and after a preemption).
  LayerRouting route_tokens(int /*step*/, int moe_layer, const std::vector<TokenRef>& tokens, Rng& rng) const override {
    std::vector<std::int32_t> ids(tokens.size());
    std::vector<std::int64_t> positions(tokens.size());
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      Rng id_rng = Rng::derive(ctx_.seed, Stream::kRequestTokenIds, static_cast<std::uint64_t>(tokens[t].sequence),
                               static_cast<std::uint64_t>(tokens[t].position));
      ids[t] = draw_id(id_rng);
      positions[t] = ctx_.seq_len > 0 ? tokens[t].position % ctx_.seq_len : tokens[t].position;
    }
    return route_ids(moe_layer, std::move(ids), positions, rng);
  }

 private:
  /// Routes tokens of the given ids and sequence positions: each follows its id's preferred set
  /// with probability `affinity`, its position's with `position_affinity`, else draws from p.
  LayerRouting route_ids(int moe_layer, std::vector<std::int32_t> ids, const std::vector<std::int64_t>& positions,
                         Rng& rng) const {
    const auto tokens = static_cast<std::int64_t>(ids.size());
    const int k = ctx_.top_k;
    const std::size_t layer = layer_index(moe_layer);
    LayerRouting r;
    r.num_tokens = tokens;
    r.top_k = k;
    r.num_experts = ctx_.experts;
    r.experts.resize(static_cast<std::size_t>(tokens * k));
    r.token_ids = std::move(ids);
    const std::vector<std::uint16_t>* by_id = o_.affinity > 0.0 ? &id_sets(layer) : nullptr;
    const std::vector<std::uint16_t>* by_position = o_.position_affinity > 0.0 ? &position_sets(layer) : nullptr;

    // One uniform per token picks its source; the tokens left to p are drawn together afterwards.
    std::vector<std::int64_t> free_tokens;
    const auto copy = [&](const std::vector<std::uint16_t>& sets, std::int64_t row, std::int64_t t) {
      for (int s = 0; s < k; ++s) r.experts[static_cast<std::size_t>(t * k + s)] = sets[static_cast<std::size_t>(row * k + s)];
    };
    for (std::int64_t t = 0; t < tokens; ++t) {
      const double u = rng.uniform01();
      if (u < o_.affinity) copy(*by_id, r.token_ids[static_cast<std::size_t>(t)], t);
      else if (u < o_.affinity + o_.position_affinity) copy(*by_position, positions[static_cast<std::size_t>(t)], t);
      else free_tokens.push_back(t);
    }
    if (!free_tokens.empty()) {
      const LayerRouting drawn = systematic_sample(pi_, k, static_cast<std::int64_t>(free_tokens.size()), rng);
      for (std::size_t j = 0; j < free_tokens.size(); ++j)
        for (int s = 0; s < k; ++s)
          r.experts[static_cast<std::size_t>(free_tokens[j] * k + s)] = drawn.expert(static_cast<std::int64_t>(j), s);
    }
    return r;
  }

  /// One Zipf-distributed vocabulary id.
  std::int32_t draw_id(Rng& rng) const {
    return static_cast<std::int32_t>(std::upper_bound(zipf_cdf_.begin(), zipf_cdf_.end() - 1, rng.uniform01()) -
                                     zipf_cdf_.begin());
  }

  std::size_t layer_index(int moe_layer) const {
    const auto n = static_cast<std::int64_t>(layers_);
    return static_cast<std::size_t>(((moe_layer % n) + n) % n);
  }

  /// Vocabulary ids (frequency ranks: 0 is the most frequent) of a batch's tokens, drawn from a
  /// stream keyed by the batch alone so that a token keeps its id through every layer.
  std::vector<std::int32_t> token_ids(int batch, std::int64_t tokens) const {
    Rng rng = Rng::derive(ctx_.seed, Stream::kBatchTokenIds, batch);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens));
    for (auto& id : ids) id = draw_id(rng);
    return ids;
  }

  const std::vector<std::uint16_t>& id_sets(std::size_t layer) const {
    std::call_once(id_once_[layer], [&] {
      std::vector<double> mass(zipf_cdf_.size());
      std::adjacent_difference(zipf_cdf_.begin(), zipf_cdf_.end(), mass.begin());
      Rng rng = Rng::derive(ctx_.seed, Stream::kIdPreference, layer);
      id_sets_[layer] = preferred_sets(mass, pi_, ctx_.top_k, rng);
    });
    return id_sets_[layer];
  }

  const std::vector<std::uint16_t>& position_sets(std::size_t layer) const {
    std::call_once(position_once_[layer], [&] {
      const std::vector<double> mass(static_cast<std::size_t>(ctx_.seq_len), 1.0 / static_cast<double>(ctx_.seq_len));
      Rng rng = Rng::derive(ctx_.seed, Stream::kPositionPreference, layer);
      position_sets_[layer] = preferred_sets(mass, pi_, ctx_.top_k, rng);
    });
    return position_sets_[layer];
  }

  Options o_;
  std::vector<double> p_;         ///< MoE-GPS §2 shares (one hot expert)
  std::vector<double> pi_;        ///< per-token inclusion probabilities of p
  std::vector<double> zipf_cdf_;  ///< cumulative Zipf mass by id
  std::size_t layers_;
  // Built lazily (a scenario constructs its routing model several times, e.g. to validate it):
  // one flag per layer, so concurrent route() calls of one model stay safe.
  std::unique_ptr<std::once_flag[]> id_once_, position_once_;
  mutable std::vector<std::vector<std::uint16_t>> id_sets_, position_sets_;  ///< k experts per id / position
};

SourceLocation at(const ParamSet& p, const std::string& name, const SourceLocation& where) {
  return p.given(name) ? p.where(name) : where;
}

std::unique_ptr<RoutingModel> make_token_conditioned(const ParamSet& p, const RoutingContext& ctx,
                                                     const SourceLocation& where) {
  TokenConditionedRouting::Options o;
  o.vocab = p.get_int("vocab");
  o.zipf_s = p.get_float("zipf_s");
  o.skewness = p.get_float("skewness");
  o.affinity = p.get_float("affinity");
  o.position_affinity = p.get_float("position_affinity");
  const double limit = static_cast<double>(ctx.experts) / ctx.top_k;
  if (o.skewness > limit * (1.0 + 1e-12))
    throw InputError(at(p, "skewness", where),
                     "'skewness' " + num(o.skewness) + " is unreachable with " + std::to_string(ctx.experts) +
                         " experts and top-" + std::to_string(ctx.top_k) + " routing (at most E/top_k = " +
                         num(limit) + ")");
  const auto hot = p.get_int("hot_expert");
  if (hot >= ctx.experts)
    throw InputError(at(p, "hot_expert", where),
                     "'hot_expert' is out of range [0, " + std::to_string(ctx.experts - 1) + "]");
  o.hot_expert = static_cast<int>(hot);
  if (ctx.experts > 65536)
    throw InputError(where, "token-conditioned routing supports at most 65536 experts");
  if (o.affinity + o.position_affinity > 1.0 + 1e-12)
    throw InputError(at(p, "position_affinity", where),
                     "'affinity' + 'position_affinity' = " + num(o.affinity + o.position_affinity) +
                         " exceeds 1 (they are the probabilities of two exclusive choices)");
  if (o.position_affinity > 0.0 && ctx.seq_len <= 0)
    throw InputError(at(p, "position_affinity", where),
                     "'position_affinity' needs the workload's seq_len, which the routing context lacks");
  return std::make_unique<TokenConditionedRouting>(ctx, o);
}

ParamSpec float_param(std::string name, std::string def, std::string help, double min,
                      std::optional<double> max = {}) {
  return ParamSpec{std::move(name), ParamType::kFloat, std::move(def), "", std::move(help), min, max, {}};
}

[[maybe_unused]] const bool kTokenConditioned = routing_models().add(
    "token-conditioned",
    "tokens carry Zipf vocabulary ids; each (layer, id) prefers experts fixed by the seed, followed with "
    "probability affinity; aggregate shares hit MoE-GPS's target skewness",
    RoutingModelInfo{
        {ParamSpec{"vocab", ParamType::kInt, "32000", "ids",
                   "vocabulary size (32000: Mixtral's and Llama 2's tokenizer)", 1.0, 262144.0, {}},
         float_param("zipf_s", "1.1", "Zipf exponent of token frequencies (≈1 for natural-language text)", 0.0, 10.0),
         float_param("skewness", "2.0",
                     "MoE-GPS §2 max/mean selections per expert, one hot expert (at most E/top_k)", 1.0),
         ParamSpec{"hot_expert", ParamType::kInt, "0", "", "id of the popular expert", 0.0, {}, {}},
         float_param("affinity", "0.6", "probability that a token takes its id's preferred experts", 0.0, 1.0),
         float_param("position_affinity", "0.0",
                     "probability that a token takes its position's preferred experts (position = t mod seq_len)",
                     0.0, 1.0)},
        make_token_conditioned});

}  // namespace
}  // namespace moesim
