// The `coactivation` routing model (issue 15): tokens pick their top-k experts with controllable
// co-activation, i.e. some experts tend to be selected together by one token, and a token's
// experts in consecutive MoE layers tend to come from the same group. Placement policies that
// co-locate experts (or prefetch the next layer's) need such structure; the other synthetic
// models draw a token's k experts independently of each other and of the previous layer.
//
// Generative model, per token and MoE layer:
//   * The model draws over positions 0..E-1, split into `groups` co-activation groups: position i
//     is in group i·groups/E (sizes differ by at most one; equal when groups divides E). Target
//     shares p (per position) come from `shares`. Position i is expert i with `layout:
//     contiguous`; with `layout: shuffled` (the default) each MoE layer maps positions to experts
//     by its own seeded permutation, so that neither a group nor a share rank is tied to expert
//     ids (in a trained model they are not; contiguous placement would otherwise coincide with
//     the groups by accident).
//   * Slot 0 holds the first expert e1 ~ p. Each further slot is drawn, with probability `intra`,
//     from e1's group (experts not yet chosen, ∝ p; from all remaining ones when the group has
//     none left), otherwise from all remaining experts ∝ p.
//   * Layer chaining: in MoE layer l > 0, with probability `follow`, e1 is drawn from the group
//     of the token's e1 in layer l−1 (∝ p inside the group) instead of from p.
// Everything below is over positions; a selection is mapped to its expert last.
// Shares: e1 follows p exactly in every layer (a followed group was itself drawn with its mass
// P(G), and p restricted to G has mass P(G)). The later slots are drawn without replacement and,
// with intra > 0, concentrate in e1's group, so realised shares of all selections deviate from p
// unless p is uniform (then every expert is exchangeable with every other — groups of equal
// size — and the shares stay exactly uniform in expectation). distribution() returns p.
//
// Token identity across layers: every draw of a token in a layer comes from a stream keyed by
// (seed, token, layer), where the token is (batch, index in batch) for route() and (request,
// position) for route_tokens(). So layer l can recompute the token's group in layer l−1 without
// any state: walking back from l, each layer's `follow` coin says whether it inherited its group;
// the first layer that did not (or layer 0) drew e1 from p, and its group is the token's group
// in l. The walk costs 1/(1−follow) layers on average (at most l). The (batch, layer) stream the
// runner passes is not used: a token's routing depends on the token alone, not on its batch mates.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "models/routing.hpp"

namespace moesim {
namespace {

// Streams (core/rng_streams.hpp): token keys are (batch, index) for route() and (request,
// position) for route_tokens(); per (token, layer) draws are seeded by the token's key; the
// per-layer position -> expert permutations of `layout: shuffled` have a stream of their own.

std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

/// Experts draw first and co-activated experts by the rules in the header; shares p are fixed.
class CoactivationRouting final : public RoutingModel {
 public:
  CoactivationRouting(RoutingContext ctx, std::vector<double> p, int groups, double intra, double follow,
                      bool shuffled)
      : RoutingModel(std::move(ctx)), p_(std::move(p)), groups_(groups), intra_(intra), follow_(follow) {
    double sum = 0.0;
    for (const double v : p_) sum += v;
    for (double& v : p_) v /= sum;
    if (!shuffled) return;
    for (int l = 0; l < std::max(1, ctx_.moe_layers); ++l) {
      std::vector<std::int32_t> perm(static_cast<std::size_t>(ctx_.experts));
      for (int e = 0; e < ctx_.experts; ++e) perm[static_cast<std::size_t>(e)] = e;
      Rng rng = Rng::derive(ctx_.seed, Stream::kCoactivationLayout, l);
      for (std::size_t i = perm.size(); i > 1; --i)
        std::swap(perm[i - 1], perm[static_cast<std::size_t>(rng.uniform01() * static_cast<double>(i)) % i]);
      expert_at_.push_back(std::move(perm));
    }
  }

  /// Pairs and layer chains are the point of this model: it is always routed token by token.
  bool supports_counts() const override { return false; }

  /// The target shares p (exactly the first expert's; see the header for the others), per expert.
  std::vector<double> distribution(int /*batch*/, int moe_layer, Rng& /*rng*/) const override {
    if (expert_at_.empty()) return p_;
    std::vector<double> by_expert(p_.size());
    const auto& perm = layout(moe_layer);
    for (std::size_t i = 0; i < p_.size(); ++i) by_expert[static_cast<std::size_t>(perm[i])] = p_[i];
    return by_expert;
  }

  LayerRouting route(int batch, int moe_layer, std::int64_t tokens, Rng& /*rng*/) const override {
    LayerRouting r = empty(tokens);
    for (std::int64_t t = 0; t < tokens; ++t)
      route_token(key(Stream::kCoactivationBatchTokens, batch, t), moe_layer, &r.experts[static_cast<std::size_t>(t * r.top_k)]);
    return r;
  }

  /// Serving steps: a token's experts depend on (request, position) alone, so a request's tokens
  /// keep their routing across steps (and after a preemption).
  LayerRouting route_tokens(int /*step*/, int moe_layer, const std::vector<TokenRef>& tokens, Rng& /*rng*/) const override {
    LayerRouting r = empty(static_cast<std::int64_t>(tokens.size()));
    for (std::size_t t = 0; t < tokens.size(); ++t)
      route_token(key(Stream::kCoactivationRequestTokens, tokens[t].sequence, tokens[t].position), moe_layer,
                  &r.experts[t * static_cast<std::size_t>(r.top_k)]);
    return r;
  }

 private:
  int group_of_position(int pos) const {
    return static_cast<int>(static_cast<std::int64_t>(pos) * groups_ / ctx_.experts);
  }
  const std::vector<std::int32_t>& layout(int moe_layer) const {
    return expert_at_[static_cast<std::size_t>(moe_layer) % expert_at_.size()];
  }

  LayerRouting empty(std::int64_t tokens) const {
    LayerRouting r;
    r.num_tokens = tokens;
    r.top_k = ctx_.top_k;
    r.num_experts = ctx_.experts;
    r.experts.resize(static_cast<std::size_t>(tokens * ctx_.top_k));
    return r;
  }

  std::uint64_t key(Stream stream, std::int64_t a, std::int64_t b) const {
    return Rng::derive(ctx_.seed, stream, a, b).next();
  }

  static Rng layer_rng(std::uint64_t token, int moe_layer) {
    return Rng::derive(token, Stream::kCoactivationLayer, moe_layer);
  }

  /// Group g holds experts [group_begin(g), group_begin(g + 1)): the smallest e with e·groups/E >= g.
  int group_begin(int g) const {
    return static_cast<int>((static_cast<std::int64_t>(g) * ctx_.experts + groups_ - 1) / groups_);
  }

  /// An expert ∝ p among [lo, hi) minus `taken` (the first `n_taken` entries); -1 if none has mass.
  int draw(int lo, int hi, const std::int32_t* taken, int n_taken, Rng& rng) const {
    const auto free = [&](int e) { return std::find(taken, taken + n_taken, e) == taken + n_taken; };
    double mass = 0.0;
    for (int e = lo; e < hi; ++e)
      if (free(e)) mass += p_[static_cast<std::size_t>(e)];
    if (mass <= 0.0) return -1;
    double u = rng.uniform01() * mass;
    int last = -1;
    for (int e = lo; e < hi; ++e) {
      if (!free(e) || p_[static_cast<std::size_t>(e)] <= 0.0) continue;
      last = e;
      if ((u -= p_[static_cast<std::size_t>(e)]) < 0.0) return e;
    }
    return last;  // rounding left u just above the last expert's share
  }

  /// The token's first expert in `moe_layer` (the follow coin is the stream's first draw).
  int first_expert(std::uint64_t token, int moe_layer) const {
    // The latest layer j <= moe_layer whose e1 was drawn from p; layers after it inherit its group.
    int j = moe_layer;
    while (j > 0 && follow_ > 0.0) {
      Rng rng = layer_rng(token, j);
      if (rng.uniform01() >= follow_) break;
      --j;
    }
    Rng rng = layer_rng(token, j);
    rng.uniform01();  // the follow coin
    const int root = draw(0, ctx_.experts, nullptr, 0, rng);
    if (j == moe_layer) return root;
    // Inherited group: e1 ∝ p inside it, drawn from this layer's own stream.
    Rng here = layer_rng(token, moe_layer);
    here.uniform01();
    const int g = group_of_position(root);
    return draw(group_begin(g), group_begin(g + 1), nullptr, 0, here);
  }

  void route_token(std::uint64_t token, int moe_layer, std::int32_t* out) const {
    out[0] = first_expert(token, moe_layer);
    // Later slots use a separate stream so that the first expert's draws above stay unshared.
    Rng rng = Rng::derive(token, Stream::kCoactivationLayer, moe_layer, 1);
    const int g = group_of_position(out[0]);
    for (int s = 1; s < ctx_.top_k; ++s) {
      int e = -1;
      if (rng.uniform01() < intra_) e = draw(group_begin(g), group_begin(g + 1), out, s, rng);
      if (e < 0) e = draw(0, ctx_.experts, out, s, rng);
      if (e < 0) e = draw_any_free(out, s);  // experts of zero share, when p has < k positive entries
      out[s] = e;
    }
    if (expert_at_.empty()) return;
    const auto& perm = layout(moe_layer);
    for (int s = 0; s < ctx_.top_k; ++s) out[s] = perm[static_cast<std::size_t>(out[s])];
  }

  int draw_any_free(const std::int32_t* taken, int n_taken) const {
    for (int e = 0; e < ctx_.experts; ++e)
      if (std::find(taken, taken + n_taken, e) == taken + n_taken) return e;
    return 0;
  }

  std::vector<double> p_;  ///< per position
  int groups_;
  double intra_, follow_;
  std::vector<std::vector<std::int32_t>> expert_at_;  ///< per MoE layer: position -> expert; empty: contiguous
};

SourceLocation at(const ParamSet& p, const std::string& name, const SourceLocation& where) {
  return p.given(name) ? p.where(name) : where;
}

/// Target shares by `shares`: uniform, Zipf over expert ids (expert r has rank r), or MoE-GPS §2
/// skewness with expert 0 hot.
std::vector<double> base_shares(const ParamSet& p, const RoutingContext& ctx, const SourceLocation& where) {
  const int n = ctx.experts;
  const std::string kind = p.get_string("shares");
  std::vector<double> share(static_cast<std::size_t>(n), 1.0);
  if (kind == "zipf") {
    for (int r = 0; r < n; ++r) share[static_cast<std::size_t>(r)] = std::pow(r + 1.0, -p.get_float("zipf_s"));
  } else if (kind == "skewness" && n > 1) {
    const double s = p.get_float("skewness");
    if (s > static_cast<double>(n) * (1.0 + 1e-12))
      throw InputError(at(p, "skewness", where),
                       "'skewness' " + num(s) + " exceeds the number of experts (" + std::to_string(n) + ")");
    std::fill(share.begin(), share.end(), (1.0 - s / n) / (n - 1.0));
    share[0] = s / n;
  }
  return share;
}

std::unique_ptr<RoutingModel> make_coactivation(const ParamSet& p, const RoutingContext& ctx,
                                                const SourceLocation& where) {
  const auto groups = p.get_int("groups");
  if (groups > ctx.experts)
    throw InputError(at(p, "groups", where), "'groups' (" + std::to_string(groups) +
                                                 ") exceeds the number of experts (" + std::to_string(ctx.experts) +
                                                 "): every group needs at least one expert");
  if (ctx.top_k > ctx.experts)
    throw InputError(where, "top_k (" + std::to_string(ctx.top_k) + ") exceeds the number of experts");
  return std::make_unique<CoactivationRouting>(ctx, base_shares(p, ctx, where), static_cast<int>(groups),
                                               p.get_float("intra"), p.get_float("follow"),
                                               p.get_string("layout") == "shuffled");
}

ParamSpec float_param(std::string name, std::string def, std::string help, double min,
                      std::optional<double> max = {}) {
  return ParamSpec{std::move(name), ParamType::kFloat, std::move(def), "", std::move(help), min, max, {}};
}

[[maybe_unused]] const bool kCoactivation = routing_models().add(
    "coactivation",
    "experts in co-activation groups: a token's further experts come from its first expert's group with "
    "probability intra, and its next layer's first expert from the same group with probability follow",
    RoutingModelInfo{
        {ParamSpec{"groups", ParamType::kInt, "4", "groups",
                   "co-activation groups (position i is in group i·groups/E; at most E)", 1.0, 65536.0, {}},
         ParamSpec{"layout", ParamType::kString, "shuffled", "",
                   "which experts the positions are: shuffled: a seeded permutation per MoE layer (groups and "
                   "share ranks not tied to expert ids, as in a trained model); contiguous: position i is expert i",
                   {}, {}, {"shuffled", "contiguous"}},
         float_param("intra", "0.8", "probability that each further selection comes from the first expert's group",
                     0.0, 1.0),
         float_param("follow", "0.0",
                     "probability that a token's first expert in MoE layer l+1 is in the group of its first expert "
                     "in layer l",
                     0.0, 1.0),
         ParamSpec{"shares", ParamType::kString, "uniform", "", "target per-expert shares p (of first experts)",
                   {}, {}, {"uniform", "zipf", "skewness"}},
         float_param("zipf_s", "1.0", "Zipf exponent for shares: zipf (position r gets ∝ 1/(r+1)^s)", 0.0),
         float_param("skewness", "2.0", "MoE-GPS §2 max/mean share for shares: skewness (position 0 hot)", 1.0)},
        make_coactivation});

}  // namespace
}  // namespace moesim
