// exflow: ExFlow's profiled, affinity-aware static expert placement, as HarMoEny describes it.
//
// HarMoEny §V-A: ExFlow places experts by inter-layer affinity (tokens follow predictable routes
// across consecutive MoE layers); §V-C2: an integer program (Gurobi) minimising the tokens routed
// between GPUs, on a profile of the workload. §III: a re-solve took 8.5 min (Switch) and 45 min
// (Qwen) against 289 ms per MoE block, so the placement is stale while skew fluctuates (Fig. 8).
//
// Objective (ours; a heuristic stands in for the ILP). L_l(g): profiled selections GPU g computes
// in MoE layer l, L̄_l their mean; X_home(l): selections whose expert is off the token's home GPU
// (a token returns home for attention in this simulator's prefill: the traffic a layer moves);
// X_aff(l): inter-layer affinity pairs (ExflowProfile::affinity) split across GPUs (ExFlow's
// objective, which pays off when routing has that structure). With λ = `traffic_weight`,
//   J = Σ_l [max_g L_l(g) + (1/G) Σ_g max(0, L_l(g) − L̄_l)] + (λ/G) Σ_l [w_home X_home(l) + w_aff X_aff(l)]
// The max load stands for the barrier all-to-all's slowest GPU; the mean overload term makes
// relieving any of several GPUs tied at the max an improvement. Every GPU holds exactly
// exflow_slots(E, G)[g] experts per layer (E/G when G divides E): static-ep's memory.
//
// Algorithm: layers in order, heaviest expert first, each to the GPU with the best locality gain
// (home traffic saved plus affinity to the previous layer) among those with a free slot whose load
// stays within the mean, else to the least loaded GPU with a free slot. Then local search: swaps of
// two experts of a layer, first improvement, until a pass improves nothing. Deterministic.
//
// Re-solving: the first solve uses `profile_batches` profiling batches (PolicyContext::
// profile_routing) before serving, at no simulated cost. With `resolve_every: n > 0` the first
// MoE layer of every n-th batch applies a placement solved from the last `profile_batches`
// observed batches, pays `solve_ms` as a CPU delay on every GPU (phase::kSchedule), and copies
// each moved expert from its old GPU to its new one (the transient extra copy is not counted in
// memory). A re-solve keeps the better of a fresh solve whose GPUs are renamed (one permutation
// for all layers, leaving load and affinity unchanged) to keep the most experts in place, and a
// local search from the placement in force; `move_weight` μ charges both μ per moved expert and
// profiled batch (μ = 0: moves are free, as for ExFlow's from-scratch ILP).
// Dispatch is static-ep's: every selection to its expert's GPU, dropless.
#include "policies/exflow.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

#include "models/model_spec.hpp"
#include "policies/memory.hpp"
#include "hardware/host_cost.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

/// Load term of one layer: the max GPU load plus the mean overload above the mean.
double load_term(const std::vector<double>& load, double mean) {
  double mx = 0.0, over = 0.0;
  for (const double x : load) {
    mx = std::max(mx, x);
    over += std::max(0.0, x - mean);
  }
  return mx + over / static_cast<double>(load.size());
}

/// E x G matrix with a one at (e, owner[e]).
Eigen::MatrixXd one_hot(const std::vector<int>& owner, int gpus) {
  Eigen::MatrixXd x = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(owner.size()), gpus);
  for (std::size_t e = 0; e < owner.size(); ++e) x(static_cast<Eigen::Index>(e), owner[e]) = 1.0;
  return x;
}

/// The construction-and-swap heuristic over one profile (see the file comment).
class Solver {
 public:
  Solver(const ExflowProfile& p, const std::vector<int>& slots, const ExflowWeights& w,
         const ExflowPlacement* previous)
      : p_(p), slots_(slots), w_(w), prev_(previous), move_cost_(w.move * p.batches),
        M_(static_cast<int>(p.home.size())), E_(M_ > 0 ? static_cast<int>(p.home[0].rows()) : 0),
        G_(static_cast<int>(slots.size())), owner_(M_, std::vector<int>(E_, -1)),
        load_(M_, std::vector<double>(G_, 0.0)), term_(M_), over_(M_), top_(M_) {
    for (int l = 0; l < M_; ++l) {
      const Eigen::VectorXd n = p.home[l].rowwise().sum();
      n_.emplace_back(n.data(), n.data() + n.size());
      mean_.push_back(n.sum() / G_);
      tol_.push_back(1e-9 * (1.0 + n.sum()));
    }
  }

  ExflowPlacement run(const ExflowPlacement* start) {
    if (start) {
      // Warm start: the given placement's loads instead of the greedy construction.
      owner_ = *start;
      for (int l = 0; l < M_; ++l)
        for (int e = 0; e < E_; ++e) load_[l][owner_[l][e]] += n_[l][e];
    } else {
      for (int l = 0; l < M_; ++l) construct(l);
    }
    for (int l = 0; l < M_; ++l) {
      gain_.push_back(gain(l));
      summarise(l);
    }
    constexpr int kMaxPasses = 200;
    for (int pass = 0; pass < kMaxPasses; ++pass) {
      bool improved = false;
      for (int l = 0; l < M_; ++l)
        for (int a = 0; a < E_; ++a)
          for (int b = a + 1; b < E_; ++b) improved = try_swap(l, a, b) || improved;
      if (!improved) break;
    }
    return owner_;
  }

 private:
  /// Traffic saved by placing each expert of layer l on each GPU, given the placed neighbours.
  Eigen::MatrixXd gain(int l) const {
    Eigen::MatrixXd s = w_.home * p_.home[l];
    if (l > 0 && owner_[l - 1][0] >= 0) s += w_.affinity * p_.affinity[l - 1].transpose() * one_hot(owner_[l - 1], G_);
    if (l + 1 < M_ && owner_[l + 1][0] >= 0) s += w_.affinity * p_.affinity[l] * one_hot(owner_[l + 1], G_);
    return s;
  }

  /// Caches layer l's load term, total overload and its three most loaded GPUs.
  void summarise(int l) {
    const auto& load = load_[l];
    term_[l] = load_term(load, mean_[l]);
    over_[l] = (term_[l] - *std::max_element(load.begin(), load.end())) * G_;
    std::vector<int> order(G_);
    std::iota(order.begin(), order.end(), 0);
    const auto k = std::min<std::size_t>(3, order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [&](int x, int y) { return load[x] > load[y]; });
    top_[l].assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
  }

  /// Greedy construction of layer l (its predecessor already placed).
  void construct(int l) {
    const Eigen::MatrixXd s = gain(l);
    std::vector<int> order(E_), used(G_, 0);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return n_[l][a] > n_[l][b]; });
    auto& load = load_[l];
    for (const int e : order) {
      // Within headroom the locality gain decides (then the lower load); without, the lower load.
      auto key = [&](int g) {
        return load[g] + n_[l][e] <= mean_[l] + tol_[l] ? std::tuple(1, s(e, g), -load[g]) : std::tuple(0, -load[g], s(e, g));
      };
      int best = -1;
      for (int g = 0; g < G_; ++g)
        if (used[g] < slots_[g] && (best < 0 || key(g) > key(best))) best = g;
      if (best < 0) throw std::logic_error("exflow: fewer expert slots than experts");
      owner_[l][e] = best;
      ++used[best];
      load[best] += n_[l][e];
    }
  }

  /// Swaps experts a and b of layer l if that lowers J; keeps gain_ consistent.
  bool try_swap(int l, int a, int b) {
    const int ga = owner_[l][a], gb = owner_[l][b];
    if (ga == gb) return false;
    auto& load = load_[l];
    const double dn = n_[l][b] - n_[l][a];  // ga gains dn, gb loses it
    const Eigen::MatrixXd& s = gain_[l];
    const double saved = s(a, gb) - s(a, ga) + s(b, ga) - s(b, gb);
    // Experts the swap takes from (+) or brings back to (-) their previous GPU.
    const auto* pl = prev_ ? &(*prev_)[l] : nullptr;
    const int moved = pl ? (gb != (*pl)[a]) - (ga != (*pl)[a]) + (ga != (*pl)[b]) - (gb != (*pl)[b]) : 0;
    if (dn == 0.0 && saved <= tol_[l] && moved >= 0) return false;
    // The load term after the swap in O(1): the max is a changed GPU's or the largest other one.
    const double na = load[ga] + dn, nb = load[gb] - dn;
    const auto other = std::find_if(top_[l].begin(), top_[l].end(), [&](int g) { return g != ga && g != gb; });
    const double mx = std::max({na, nb, other == top_[l].end() ? 0.0 : load[*other]});
    auto over = [&](double x) { return std::max(0.0, x - mean_[l]); };
    const double overload = over_[l] + over(na) - over(load[ga]) + over(nb) - over(load[gb]);
    const double delta = mx + overload / G_ - term_[l] - w_.traffic / G_ * saved + move_cost_ * moved;
    if (delta >= -tol_[l]) return false;
    load[ga] = na;
    load[gb] = nb;
    summarise(l);
    owner_[l][a] = gb;
    owner_[l][b] = ga;
    // Affinity of the neighbouring layers' experts to GPUs ga and gb changed.
    auto shift = [&](int layer, const Eigen::VectorXd& v) {
      gain_[layer].col(ga) += v;
      gain_[layer].col(gb) -= v;
    };
    if (l + 1 < M_) shift(l + 1, w_.affinity * (p_.affinity[l].row(b) - p_.affinity[l].row(a)).transpose());
    if (l > 0) shift(l - 1, w_.affinity * (p_.affinity[l - 1].col(b) - p_.affinity[l - 1].col(a)));
    return true;
  }

  const ExflowProfile& p_;
  const std::vector<int>& slots_;
  ExflowWeights w_;
  const ExflowPlacement* prev_;
  double move_cost_;
  int M_, E_, G_;
  ExflowPlacement owner_;
  std::vector<std::vector<double>> load_;
  std::vector<double> term_, over_;    ///< per layer: load term and total overload
  std::vector<std::vector<int>> top_;  ///< per layer: the most loaded GPUs, descending
  std::vector<std::vector<double>> n_;
  std::vector<double> mean_, tol_;
  std::vector<Eigen::MatrixXd> gain_;
};

/// A numeric option with a lower bound (and an upper one: a count of work has a physical bound).
ParamSpec number(std::string name, ParamType type, std::string def, std::string unit, std::string help, double min,
                 std::optional<double> max = {}) {
  return ParamSpec{std::move(name), type, std::move(def), std::move(unit), std::move(help), min, max, {}};
}

const bool registered = policies().add(
    "exflow",
    "ExFlow (HarMoEny §III, §V): profiled static placement by inter-layer affinity and load, stale between re-solves",
    PolicyInfo{
        {placement_param(),
         number("profile_batches", ParamType::kInt, "8", "batches",
                "profiling window: profiling batches before serving, then the last batches observed for a re-solve", 1,
                kMaxProfileBatches),
         number("resolve_every", ParamType::kInt, "0", "batches",
                "0 = solve once before serving; n > 0 = re-solve from the observed routing every n batches", 0),
         number("solve_ms", ParamType::kFloat, "0", "ms",
                "CPU time of a re-solve, paid by every GPU in the first MoE layer of the batch that applies it "
                "(HarMoEny §III measured ExFlow's ILP at 8.5 min for Switch, 45 min for Qwen)", 0, 1e7),
         number("traffic_weight", ParamType::kFloat, "1.0", "",
                "lambda: weight of cross-GPU selections per GPU against the busiest GPU's load", 0),
         number("home_weight", ParamType::kFloat, "1.0", "",
                "weight of selections whose expert is not on the token's home GPU", 0),
         number("affinity_weight", ParamType::kFloat, "1.0", "",
                "weight of inter-layer affinity pairs (layer l expert, layer l+1 expert) split across GPUs", 0),
         number("move_weight", ParamType::kFloat, "0", "",
                "re-solves: cost of moving one expert, in selections on the busiest GPU per profiled batch; "
                "0 = moves are free (as ExFlow's re-solve), though GPUs are still renamed to avoid needless ones", 0)},
        [](const ParamSet& p) { return std::make_unique<ExflowPolicy>(p); }});

}  // namespace

ExflowProfile::ExflowProfile(int moe_layers, int experts, int gpus)
    : home(moe_layers, Eigen::MatrixXd::Zero(experts, gpus)),
      affinity(std::max(0, moe_layers - 1), Eigen::MatrixXd::Zero(experts, experts)) {}

void ExflowProfile::add_batch(const std::vector<LayerRouting>& routing, const std::vector<int>& token_home) {
  if (routing.size() != home.size()) throw std::logic_error("ExflowProfile: one routing per MoE layer expected");
  ++batches;
  for (std::size_t l = 0; l < routing.size(); ++l) {
    const LayerRouting& r = routing[l];
    if (r.num_tokens > static_cast<std::int64_t>(token_home.size()))
      throw std::logic_error("ExflowProfile: a token without a home GPU");
    for (std::int64_t t = 0; t < r.num_tokens; ++t)
      for (int s = 0; s < r.top_k; ++s) home[l](r.expert(t, s), token_home[t]) += 1.0;
    if (l + 1 == routing.size()) continue;
    // The same token index is the same token in every layer of a batch.
    const LayerRouting& next = routing[l + 1];
    const double w = 1.0 / next.top_k;
    for (std::int64_t t = 0; t < std::min(r.num_tokens, next.num_tokens); ++t)
      for (int s = 0; s < r.top_k; ++s)
        for (int s2 = 0; s2 < next.top_k; ++s2) affinity[l](r.expert(t, s), next.expert(t, s2)) += w;
  }
}

std::vector<int> exflow_slots(int experts, int gpus, const std::string& placement) {
  std::vector<int> slots(gpus, 0);
  for (const int g : static_owner(placement, experts, gpus)) ++slots[g];
  return slots;
}

ExflowCost exflow_cost(const ExflowProfile& p, const ExflowPlacement& owner, const ExflowWeights& w,
                       const ExflowPlacement* previous) {
  ExflowCost c;
  const auto M = p.home.size();
  const int G = M > 0 ? static_cast<int>(p.home[0].cols()) : 1;
  for (std::size_t l = 0; l < M; ++l) {
    std::vector<double> load(G, 0.0);
    for (Eigen::Index e = 0; e < p.home[l].rows(); ++e) {
      const int g = owner[l][e];
      if (previous && (*previous)[l][e] != g) ++c.moved;
      load[g] += p.home[l].row(e).sum();
      c.traffic += w.home * (p.home[l].row(e).sum() - p.home[l](e, g));
    }
    c.load += load_term(load, std::accumulate(load.begin(), load.end(), 0.0) / G);
    if (l + 1 == M) continue;
    for (Eigen::Index e = 0; e < p.affinity[l].rows(); ++e)
      for (Eigen::Index f = 0; f < p.affinity[l].cols(); ++f)
        if (owner[l][e] != owner[l + 1][f]) c.traffic += w.affinity * p.affinity[l](e, f);
  }
  c.total = c.load + w.traffic / G * c.traffic + w.move * p.batches * c.moved;
  return c;
}

ExflowPlacement exflow_place(const ExflowProfile& p, const std::vector<int>& slots, const ExflowWeights& w,
                             const ExflowPlacement* previous) {
  if (!previous) return Solver(p, slots, w, nullptr).run(nullptr);
  // A re-solve: the better of a fresh solve whose GPUs are renamed to keep experts in place, and
  // a local search from the placement in force, both charged for the experts they move.
  const ExflowPlacement fresh = exflow_keep_in_place(Solver(p, slots, w, nullptr).run(nullptr), *previous, slots);
  const ExflowPlacement a = Solver(p, slots, w, previous).run(&fresh);
  const ExflowPlacement b = Solver(p, slots, w, previous).run(previous);
  const ExflowCost ca = exflow_cost(p, a, w, previous), cb = exflow_cost(p, b, w, previous);
  const double tol = 1e-9 * (1.0 + std::abs(cb.total));
  return ca.total < cb.total - tol || (ca.total <= cb.total + tol && ca.moved < cb.moved) ? a : b;
}

ExflowPlacement exflow_keep_in_place(const ExflowPlacement& placement, const ExflowPlacement& previous,
                                     const std::vector<int>& slots) {
  const int G = static_cast<int>(slots.size());
  // shared(a, b): experts that GPU a holds in `placement` and GPU b held in `previous`.
  Eigen::MatrixXi shared = Eigen::MatrixXi::Zero(G, G);
  for (std::size_t l = 0; l < placement.size(); ++l)
    for (std::size_t e = 0; e < placement[l].size(); ++e) ++shared(placement[l][e], previous[l][e]);
  // Greedy matching, largest overlap first (ties: lower indices), only between GPUs with the same
  // slot count so that the renamed placement keeps every GPU's count.
  std::vector<int> rename(G, -1);
  std::vector<char> taken(G, 0);
  for (int k = 0; k < G; ++k) {
    std::pair<int, int> best{-1, -1};
    for (int a = 0; a < G; ++a)
      for (int b = 0; b < G; ++b)
        if (rename[a] < 0 && !taken[b] && slots[a] == slots[b] &&
            (best.first < 0 || shared(a, b) > shared(best.first, best.second)))
          best = {a, b};
    rename[best.first] = best.second;
    taken[best.second] = 1;
  }
  ExflowPlacement out = placement;
  for (auto& layer : out)
    for (int& g : layer) g = rename[g];
  return out;
}

void ExflowPolicy::setup(const PolicyContext& ctx) {
  const int E = ctx.model.experts, G = ctx.cluster.num_gpus(), M = ctx.model.num_moe_layers();
  slots_ = exflow_slots(E, G, placement_);
  const ExflowPlacement start(static_cast<std::size_t>(M), static_owner(placement_, E, G));
  previous_.clear();
  current_.clear();
  seen_.clear();
  current_batch_ = -1;
  served_ = resolves_ = 0;
  // No routing model to profile: the static layout.
  if (!ctx.profile_routing || M == 0) {
    owner_ = start;
    return;
  }
  // Profiling batches have the served batches' shape: the same token homes (batch_planner.cpp).
  std::vector<int> token_home;
  const auto home = home_tokens_of(ctx.workload, G);
  for (int g = 0; g < G; ++g) token_home.insert(token_home.end(), static_cast<std::size_t>(home[g]), g);
  ExflowProfile profile(M, E, G);
  for (int i = 0; i < profile_batches_; ++i) {
    std::vector<LayerRouting> layers;
    for (int l = 0; l < M; ++l) layers.push_back(ctx.profile_routing(i, l));
    profile.add_batch(layers, token_home);
  }
  // The weights are loaded in the solved layout before serving (untimed); its GPUs are renamed to
  // keep as many experts as possible where the static layout has them, so `placement` decides
  // which of the equally good solutions is served.
  owner_ = exflow_keep_in_place(exflow_place(profile, slots_, weights_), start, slots_);
}

void ExflowPolicy::start_batch(const PolicyContext& ctx, const MoeLayerInput& in) {
  const int M = ctx.model.num_moe_layers();
  if (current_batch_ >= 0) {
    ++served_;
    if (resolve_every_ > 0 && static_cast<int>(current_.size()) == M) {
      seen_.push_back(std::move(current_));
      while (static_cast<int>(seen_.size()) > profile_batches_) seen_.pop_front();
    }
  }
  current_.clear();
  current_batch_ = in.batch;
  previous_.clear();
  if (resolve_every_ <= 0 || served_ < resolve_every_ || seen_.empty()) return;
  ExflowProfile profile(M, ctx.model.experts, ctx.cluster.num_gpus());
  for (const auto& batch : seen_) profile.add_batch(batch, *in.token_home);
  previous_ = owner_;
  owner_ = exflow_place(profile, slots_, weights_, &previous_);
  served_ = 0;
  ++resolves_;
}

Dispatch ExflowPolicy::dispatch(const PolicyContext& ctx, const MoeLayerInput& in) {
  // Each batch walks the MoE layers in order, so layer 0 starts a batch.
  if (in.moe_index == 0) start_batch(ctx, in);
  if (resolve_every_ > 0) current_.push_back(*in.routing);
  const LayerRouting& r = *in.routing;
  const auto &home = *in.token_home, &own = owner_[in.moe_index];
  Dispatch d(ctx.cluster.num_gpus(), ctx.model.experts);
  for_each_selection(r, home, [&](int g, int e, std::int64_t n) {
    d.send[g][own[e]] += n;
    d.load[own[e]][e] += n;
  });
  if (!previous_.empty()) {
    const auto& old = previous_[in.moe_index];
    for (int e = 0; e < ctx.model.experts; ++e)
      if (old[e] != own[e]) d.copies.push_back(WeightCopy{e, ctx.cluster.gpu_endpoint(old[e]), own[e]});
    // The first layer's copies wait for the solve; later layers start after it anyway.
    d.copies_start = in.moe_index == 0 && solve_ms_ > 0.0 ? CopyStart::kAfterSchedule : CopyStart::kLayerStart;
  }
  return d;
}

std::vector<TaskId> ExflowPolicy::before_scatter(TaskGraph& plan, const PolicyContext& ctx, const MoeLayerInput& in,
                                                 TaskId all_routed) {
  std::vector<TaskId> out(static_cast<std::size_t>(ctx.cluster.num_gpus()), all_routed);
  if (previous_.empty() || in.moe_index != 0 || solve_ms_ <= 0.0) return out;
  // The re-solve is host work every GPU waits for before it scatters with the new placement:
  // a placement of the layer's experts, of reference time `solve_ms` (priced by the host model).
  const Op work = host_work("exflow.solve", ctx.model.experts, solve_ms_ * 1e-3);
  const TaskId dep[] = {all_routed};
  for (std::size_t g = 0; g < out.size(); ++g)
    out[g] = plan.host(static_cast<int>(g), phase::kSchedule, in.layer, work, dep);
  return out;
}

}  // namespace moesim
