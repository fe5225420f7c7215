// Synthetic routing models from the papers: uniform, HarMoEny's skewed and fluctuating routers,
// MoEShard's (alpha_r, k_r) router, MoE-GPS's target skewness, Zipf and AMoE's exponential fit.
// Each defines per-expert shares p; RoutingModel::route draws top-k distinct experts from them.
#include <cmath>
#include <numeric>
#include <sstream>
#include <string>

#include "models/routing.hpp"

namespace moesim {

Registry<RoutingModelInfo>& routing_models() {
  static Registry<RoutingModelInfo> registry("routing model");
  return registry;
}

namespace {

using Rows = std::vector<std::vector<double>>;

// Where a problem with option `name` is reported: at the value if the user wrote it, else at
// the routing model's `kind`.
SourceLocation at(const ParamSet& p, const std::string& name, const SourceLocation& where) {
  return p.given(name) ? p.where(name) : where;
}

std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

ParamSpec int_param(std::string name, std::string def, std::string help, double min) {
  return ParamSpec{std::move(name), ParamType::kInt, std::move(def), "experts", std::move(help), min, {}, {}};
}

ParamSpec float_param(std::string name, std::string def, std::string help, double min,
                      std::optional<double> max = {}) {
  return ParamSpec{std::move(name), ParamType::kFloat, std::move(def), "", std::move(help), min, max, {}};
}

/// HarMoEny §V-A: "the selected skewed experts are assigned a probability proportional to α and
/// the remaining experts share the remaining probability evenly". We read that as: the hot set
/// H receives a share max(α, |H|/E) of all selections, split evenly inside H, and the other
/// experts split the rest evenly. The max() makes α = 0 exactly uniform and never makes the hot
/// experts colder than the rest.
std::vector<double> skewed_shares(int experts, const std::vector<int>& hot, double alpha) {
  const double h = static_cast<double>(hot.size());
  const double e = static_cast<double>(experts);
  if (hot.empty() || static_cast<int>(hot.size()) == experts) return std::vector<double>(experts, 1.0 / e);
  const double hot_share = std::max(alpha, h / e);
  std::vector<double> p(static_cast<std::size_t>(experts), (1.0 - hot_share) / (e - h));
  for (const int i : hot) p[static_cast<std::size_t>(i)] = hot_share / h;
  return p;
}

/// `count` distinct experts drawn uniformly (partial Fisher–Yates), in draw order.
std::vector<int> random_experts(int experts, int count, Rng& rng) {
  std::vector<int> ids(static_cast<std::size_t>(experts));
  std::iota(ids.begin(), ids.end(), 0);
  for (int i = 0; i < count; ++i)
    std::swap(ids[i], ids[i + static_cast<int>(rng.below(static_cast<std::uint64_t>(experts - i)))]);
  ids.resize(static_cast<std::size_t>(count));
  return ids;
}

/// HarMoEny Fig. 1: deeper layers are more skewed (Switch-128: 17.4% of tokens on three experts
/// in the first MoE layer, 34.5% in the last). MoE layer l of L scales α by 1 − g + g·l/(L−1):
/// α(1−g) in the first layer, α in the last, α everywhere when g = 0 or L = 1.
double depth_factor(double gradient, int moe_layer, int moe_layers) {
  if (gradient == 0.0 || moe_layers <= 1) return 1.0;
  return 1.0 - gradient + gradient * static_cast<double>(moe_layer) / static_cast<double>(moe_layers - 1);
}

ParamSpec depth_gradient_param() {
  return float_param("depth_gradient", "0.0",
                     "deeper MoE layers more skewed: MoE layer l of L uses alpha·(1 − g + g·l/(L−1)) "
                     "(0 = the same alpha in every layer)",
                     0.0, 1.0);
}

// Draws fixed once per run (the hot set) or per batch (the fluctuation) have streams of their own
// (core/rng_streams.hpp), apart from the (batch, layer) routing streams.

/// Ranked shares (zipf, exponential): p[rank]. "random" order assigns ranks to experts by a
/// permutation drawn once from the seed, so the hottest experts are not all on the first GPU.
std::vector<double> ordered(std::vector<double> by_rank, const std::string& order, const RoutingContext& ctx) {
  if (order != "random") return by_rank;
  Rng rng = Rng::derive(ctx.seed, Stream::kHotSet, 1);
  const std::vector<int> perm = random_experts(ctx.experts, ctx.experts, rng);
  std::vector<double> p(by_rank.size());
  for (std::size_t r = 0; r < by_rank.size(); ++r) p[static_cast<std::size_t>(perm[r])] = by_rank[r];
  return p;
}

const ParamSpec kOrderParam{"order", ParamType::kString, "ranked", "",
                            "which expert gets rank r: 'ranked' = expert r, 'random' = a permutation fixed by the seed",
                            {}, {}, {"ranked", "random"}};

std::unique_ptr<RoutingModel> table(const RoutingContext& ctx, std::vector<double> p) {
  return std::make_unique<TableRoutingModel>(ctx, Rows{std::move(p)});
}

// --- uniform -----------------------------------------------------------------------------------

[[maybe_unused]] const bool kUniform = routing_models().add(
    "uniform", "every expert equally likely (a perfectly balanced router)",
    RoutingModelInfo{{}, [](const ParamSet&, const RoutingContext& ctx, const SourceLocation&) {
                       return table(ctx, std::vector<double>(static_cast<std::size_t>(ctx.experts), 1.0));
                     }});

// --- skewed (HarMoEny §V-A) --------------------------------------------------------------------

std::unique_ptr<RoutingModel> make_skewed(const ParamSet& p, const RoutingContext& ctx, const SourceLocation& where) {
  std::vector<int> hot;
  // An empty list is the default a resolved scenario writes back: it means "use hot_experts".
  if (p.given("hot_list") && !p.get_int_list("hot_list").empty()) {
    const auto list = p.get_int_list("hot_list");
    std::vector<char> seen(static_cast<std::size_t>(ctx.experts), 0);
    for (const auto id : list) {
      if (id < 0 || id >= ctx.experts)
        throw InputError(at(p, "hot_list", where), "'hot_list': expert " + std::to_string(id) +
                                                       " is out of range [0, " + std::to_string(ctx.experts - 1) + "]");
      if (seen[static_cast<std::size_t>(id)]++)
        throw InputError(at(p, "hot_list", where), "'hot_list': expert " + std::to_string(id) + " is listed twice");
      hot.push_back(static_cast<int>(id));
    }
    if (p.given("hot_experts") && p.get_int("hot_experts") != static_cast<std::int64_t>(list.size()))
      throw InputError(at(p, "hot_experts", where), "'hot_experts' disagrees with the length of 'hot_list'");
  } else {
    const auto h = p.get_int("hot_experts");
    if (h > ctx.experts)
      throw InputError(at(p, "hot_experts", where), "'hot_experts' (" + std::to_string(h) +
                                                        ") exceeds the number of experts (" + std::to_string(ctx.experts) + ")");
    if (p.get_string("hot") == "random") {
      Rng rng = Rng::derive(ctx.seed, Stream::kHotSet);
      hot = random_experts(ctx.experts, static_cast<int>(h), rng);
    } else {
      for (int i = 0; i < h; ++i) hot.push_back(i);
    }
  }
  // One row per MoE layer when the skew grows with depth; a single row (every layer) otherwise.
  const double gradient = p.get_float("depth_gradient");
  const int rows = gradient > 0.0 ? std::max(1, ctx.moe_layers) : 1;
  Rows shares;
  for (int l = 0; l < rows; ++l)
    shares.push_back(skewed_shares(ctx.experts, hot, p.get_float("alpha") * depth_factor(gradient, l, rows)));
  return std::make_unique<TableRoutingModel>(ctx, std::move(shares));
}

[[maybe_unused]] const bool kSkewed = routing_models().add(
    "skewed", "HarMoEny §V-A router skew: a hot set gets a share alpha of all selections",
    RoutingModelInfo{
        {float_param("alpha", "0.9", "share of all selections that goes to the hot experts (0 = uniform)", 0.0, 1.0),
         int_param("hot_experts", "1", "number of hot experts", 1),
         ParamSpec{"hot", ParamType::kString, "first", "", "which experts are hot: the first ones, or a set fixed by the seed",
                   {}, {}, {"first", "random"}},
         ParamSpec{"hot_list", ParamType::kIntList, "[]", "", "explicit hot expert ids (overrides 'hot' and 'hot_experts'); empty = use hot_experts", 0.0, {}, {}},
         depth_gradient_param()},
        make_skewed});

// --- moeshard (MoEShard §4) --------------------------------------------------------------------

std::unique_ptr<RoutingModel> make_moeshard(const ParamSet& p, const RoutingContext& ctx, const SourceLocation& where) {
  const int e = ctx.experts;
  // §4 ran k_r = 10% of the experts; at least one so the router is skewed at all.
  std::int64_t k_r = p.get_int("k_r");
  if (k_r == 0) k_r = std::max<std::int64_t>(1, std::llround(p.get_float("k_r_fraction") * e));
  if (k_r > e)
    throw InputError(at(p, "k_r", where), "'k_r' (" + std::to_string(k_r) + ") exceeds the number of experts (" +
                                              std::to_string(e) + ")");
  // p_i ∝ 1/|E| + α_r for the first k_r experts, 1/|E| for the others.
  std::vector<double> share(static_cast<std::size_t>(e), 1.0 / e);
  for (std::int64_t i = 0; i < k_r; ++i) share[static_cast<std::size_t>(i)] += p.get_float("alpha_r");
  return table(ctx, std::move(share));
}

[[maybe_unused]] const bool kMoeShard = routing_models().add(
    "moeshard", "MoEShard §4 router: p_i ∝ 1/E + alpha_r for the first k_r experts, 1/E otherwise",
    RoutingModelInfo{{float_param("alpha_r", "0.6", "router skew added to each skewed expert's weight", 0.0),
                      float_param("k_r_fraction", "0.1", "skewed experts as a fraction of E (used when k_r = 0)", 0.0, 1.0),
                      int_param("k_r", "0", "number of skewed experts; 0 = max(1, round(k_r_fraction·E))", 0)},
                     make_moeshard});

// --- skewness (MoE-GPS §2) ---------------------------------------------------------------------

std::unique_ptr<RoutingModel> make_skewness(const ParamSet& p, const RoutingContext& ctx, const SourceLocation& where) {
  const double s = p.get_float("skewness");
  const double e = static_cast<double>(ctx.experts);
  // The hot expert takes s/E of all selections; with k distinct experts per token it can take
  // at most one selection per token, i.e. 1/k of them, so s <= E/k.
  const double limit = e / ctx.top_k;
  if (s > limit * (1.0 + 1e-12))
    throw InputError(at(p, "skewness", where),
                     "'skewness' " + num(s) + " is unreachable with " + std::to_string(ctx.experts) +
                         " experts and top-" + std::to_string(ctx.top_k) + " routing (at most E/top_k = " +
                         num(limit) + ")");
  const auto hot = p.get_int("hot_expert");
  if (hot >= ctx.experts)
    throw InputError(at(p, "hot_expert", where), "'hot_expert' is out of range [0, " + std::to_string(ctx.experts - 1) + "]");
  if (ctx.experts == 1) return table(ctx, {1.0});
  std::vector<double> share(static_cast<std::size_t>(ctx.experts), (1.0 - s / e) / (e - 1.0));
  share[static_cast<std::size_t>(hot)] = s / e;
  return table(ctx, std::move(share));
}

[[maybe_unused]] const bool kSkewness = routing_models().add(
    "skewness", "MoE-GPS §2: one expert gets skewness/E of all selections, the rest share evenly",
    RoutingModelInfo{{float_param("skewness", "2.0", "max/mean tokens per expert (1 = balanced, at most E/top_k)", 1.0),
                      ParamSpec{"hot_expert", ParamType::kInt, "0", "", "id of the popular expert", 0.0, {}, {}}},
                     make_skewness});

// --- zipf, exponential (AMoE §5) ---------------------------------------------------------------

[[maybe_unused]] const bool kZipf = routing_models().add(
    "zipf", "Zipf popularity: the expert of rank r gets a share ∝ 1/(r+1)^s",
    RoutingModelInfo{{float_param("s", "1.0", "Zipf exponent (0 = uniform)", 0.0), kOrderParam},
                     [](const ParamSet& p, const RoutingContext& ctx, const SourceLocation&) {
                       std::vector<double> by_rank(static_cast<std::size_t>(ctx.experts));
                       for (int r = 0; r < ctx.experts; ++r) by_rank[r] = std::pow(r + 1.0, -p.get_float("s"));
                       return table(ctx, ordered(std::move(by_rank), p.get_string("order"), ctx));
                     }});

// AMoE §5 fitted Mixtral's expert loads on Dolly to an exponential distribution and routed by it.
// The paper does not print λ, so 0.5 is only a default.
[[maybe_unused]] const bool kExponential = routing_models().add(
    "exponential", "AMoE §5 exponential fit: the expert of rank r gets a share ∝ exp(-lambda·r)",
    RoutingModelInfo{{float_param("lambda", "0.5", "decay per rank (0 = uniform)", 0.0), kOrderParam},
                     [](const ParamSet& p, const RoutingContext& ctx, const SourceLocation&) {
                       std::vector<double> by_rank(static_cast<std::size_t>(ctx.experts));
                       for (int r = 0; r < ctx.experts; ++r) by_rank[r] = std::exp(-p.get_float("lambda") * r);
                       return table(ctx, ordered(std::move(by_rank), p.get_string("order"), ctx));
                     }});

// --- fluctuating (HarMoEny Fig. 8) -------------------------------------------------------------

/// HarMoEny §V-B, Fig. 8: every batch has its own randomly chosen skew between 0% and 95%. Each
/// batch draws α ~ U[alpha_min, alpha_max] and a random hot set, then routes as `skewed`. The
/// draw comes from a stream keyed by the batch only, so all layers of a batch share it (with
/// `depth_gradient`, layer l uses α scaled by depth_factor, the same hot set).
class FluctuatingRouting : public RoutingModel {
 public:
  FluctuatingRouting(RoutingContext ctx, double lo, double hi, int hot, double gradient)
      : RoutingModel(std::move(ctx)), lo_(lo), hi_(hi), hot_(hot), gradient_(gradient) {}

  std::vector<double> distribution(int batch, int moe_layer, Rng& /*rng*/) const override {
    Rng rng = Rng::derive(ctx_.seed, Stream::kFluctuation, batch);
    const double alpha = rng.uniform(lo_, hi_) * depth_factor(gradient_, moe_layer, ctx_.moe_layers);
    return skewed_shares(ctx_.experts, random_experts(ctx_.experts, hot_, rng), alpha);
  }

 private:
  double lo_, hi_;
  int hot_;
  double gradient_;
};

std::unique_ptr<RoutingModel> make_fluctuating(const ParamSet& p, const RoutingContext& ctx, const SourceLocation& where) {
  const double lo = p.get_float("alpha_min"), hi = p.get_float("alpha_max");
  if (lo > hi) throw InputError(at(p, "alpha_min", where), "'alpha_min' exceeds 'alpha_max'");
  const auto h = p.get_int("hot_experts");
  if (h > ctx.experts)
    throw InputError(at(p, "hot_experts", where), "'hot_experts' (" + std::to_string(h) +
                                                      ") exceeds the number of experts (" + std::to_string(ctx.experts) + ")");
  return std::make_unique<FluctuatingRouting>(ctx, lo, hi, static_cast<int>(h), p.get_float("depth_gradient"));
}

[[maybe_unused]] const bool kFluctuating = routing_models().add(
    "fluctuating", "HarMoEny Fig. 8: each batch draws its own skew alpha and random hot experts",
    RoutingModelInfo{{float_param("alpha_min", "0.0", "lowest per-batch skew", 0.0, 1.0),
                      float_param("alpha_max", "0.95", "highest per-batch skew", 0.0, 1.0),
                      int_param("hot_experts", "1", "number of hot experts per batch", 1),
                      depth_gradient_param()},
                     make_fluctuating});

}  // namespace
}  // namespace moesim
