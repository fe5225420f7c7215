// Acting on a forecast (MoE-GPS §3.1–3.3). Readings where the paper is silent or loose:
//
// Placement. Algorithm 1 runs on the predicted map (§3.1: the predictor "guide[s] the expert
// placement"); its copies start at the layer start, since the prediction precedes attention.
// kDistribution has no per-token map, so it plans on round(N·p̂_e) synthetic items per expert —
// enough, because Algorithm 1's placement depends only on how many items of each expert it sees.
//
// Realised compute. The router's true selections are then computed within that placement, with
// no further copies: kTokens keeps each selection on the GPU Algorithm 1 gave its predicted
// expert when that GPU hosts its true expert; kDistribution fills the per-(GPU, expert) quotas
// Algorithm 1 planned, in token order. What is left goes to its expert's least loaded host.
// With a perfect forecast every selection lands where Algorithm 1 put it: balanced.
//
// Compute error model (§3.3, Fig. 5). ε = Forecast::error. The bottleneck GPU b is raised to
// typical ⌈(1 + ε)·avg⌉ or pessimistic ⌈avg + ε·total⌉; optimistic leaves it. The paper writes
// the pessimistic bound as N·(1 + ε)·avg with N the GPU count (§2), which exceeds every
// selection there is (G·avg = total) and does not return to balance at ε = 0; "all errors on one
// GPU" reads as b doing its fair share plus every erroneous selection: avg + ε·total =
// (1 + G·ε)·avg. The target never lowers b: a placement planned on a wrong forecast may already
// leave b above it (errors are imbalance added to what the placement leaves, not a cap on it).
//
// Communication (§2, §3.2, Fig. 3). kDistribution: "tokens are still randomly scattered" —
// home → computing GPU, gather back. kTokens: a selection was sent before attention to the GPU
// its predicted expert was dispatched to (the paper's attention is tensor-parallel, so after its
// all-reduce every GPU holds every token and this costs nothing; we keep that accounting). A
// selection computed there skips the scatter; any other is forwarded from where it sits to the
// GPU computing it, and every output returns home in the gather. Where it sits follows the
// error model (§3.3, "optimistic cases do not exist in this context"): typical and optimistic —
// where Algorithm 1 put it; pessimistic — every mispredicted selection sits on b.
#include "policies/prediction_dispatch.hpp"

#include <algorithm>
#include <cmath>
#include <queue>
#include <stdexcept>
#include <string>
#include <utility>

namespace moesim {
namespace {

/// Whether GPU g holds expert e in the placement.
bool hosts(const std::vector<std::vector<int>>& gpus_of_expert, int e, int g) {
  const auto& h = gpus_of_expert[static_cast<std::size_t>(e)];
  return std::find(h.begin(), h.end(), g) != h.end();
}

/// Items per GPU (items not yet placed, at −1, count nowhere).
std::vector<std::int64_t> loads_of(const std::vector<int>& gpu_of_item, int gpus) {
  std::vector<std::int64_t> load(static_cast<std::size_t>(gpus), 0);
  for (const int g : gpu_of_item)
    if (g >= 0) ++load[static_cast<std::size_t>(g)];
  return load;
}

/// ⌈x⌉ for an x computed from a measured ε: a value within 1e-9 of an integer is that integer
/// ((1 + 0.1)·10 evaluates to 11.000000000000002, which must not become 12).
std::int64_t ceil_measured(double x) { return static_cast<std::int64_t>(std::ceil(x - 1e-9)); }

/// kDistribution: each true selection takes a slot Algorithm 1 planned for its expert on one of
/// its hosts (hosts in placement order, selections in token order); -1 where its expert's slots
/// are used up (the forecast under-predicted it).
std::vector<int> fill_planned_slots(const std::vector<std::int32_t>& truth, const std::vector<std::int32_t>& planned,
                                    const Duplication& dup, int gpus) {
  const std::size_t E = dup.gpus_of_expert.size();
  std::vector<std::vector<std::int64_t>> slots(static_cast<std::size_t>(gpus), std::vector<std::int64_t>(E, 0));
  for (std::size_t i = 0; i < planned.size(); ++i)
    ++slots[static_cast<std::size_t>(dup.gpu_of_item[i])][static_cast<std::size_t>(planned[i])];
  std::vector<int> gpu_of_item(truth.size(), -1);
  for (std::size_t i = 0; i < truth.size(); ++i)
    for (const int g : dup.gpus_of_expert[static_cast<std::size_t>(truth[i])]) {
      auto& left = slots[static_cast<std::size_t>(g)][static_cast<std::size_t>(truth[i])];
      if (left > 0) {
        --left;
        gpu_of_item[i] = g;
        break;
      }
    }
  return gpu_of_item;
}

}  // namespace

std::vector<std::int64_t> apportion(const std::vector<double>& share, std::int64_t n) {
  double sum = 0.0;
  for (const double s : share) {
    if (!(s >= 0.0)) throw std::invalid_argument("apportion: shares must be non-negative");
    sum += s;
  }
  if (!(sum > 0.0)) throw std::invalid_argument("apportion: shares must not all be zero");
  const std::size_t E = share.size();
  std::vector<std::int64_t> count(E);
  std::vector<double> rest(E);
  std::int64_t given = 0;
  for (std::size_t e = 0; e < E; ++e) {
    const double exact = static_cast<double>(n) * share[e] / sum;
    count[e] = static_cast<std::int64_t>(std::floor(exact));
    rest[e] = exact - static_cast<double>(count[e]);
    given += count[e];
  }
  std::vector<std::size_t> order(E);
  for (std::size_t e = 0; e < E; ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return rest[a] > rest[b]; });
  // Largest remainders first. Floors lose under one item per expert, so fewer than E are left
  // to hand out; floating-point n·share may overshoot an integer, which the smallest give back.
  for (std::size_t k = 0; given < n; ++given) ++count[order[k++ % E]];
  for (std::size_t k = E; given > n && k > 0;)
    if (count[order[--k]] > 0) {
      --count[order[k]];
      --given;
    }
  return count;
}

std::vector<std::int32_t> planned_items(const Forecast& f, const LayerRouting& r) {
  const std::size_t N = r.experts.size();
  switch (f.kind) {
    case Forecast::Kind::kNone:
      break;
    case Forecast::Kind::kTokens:
      if (f.selection_expert.size() != N)
        throw std::invalid_argument("planned_items: " + std::to_string(f.selection_expert.size()) +
                                    " predicted selections for " + std::to_string(N));
      for (const std::int32_t e : f.selection_expert)
        if (e < 0 || e >= r.num_experts) throw std::invalid_argument("planned_items: predicted expert out of range");
      return f.selection_expert;
    case Forecast::Kind::kDistribution: {
      if (static_cast<int>(f.expert_share.size()) != r.num_experts)
        throw std::invalid_argument("planned_items: expert_share needs one share per expert");
      const auto counts = apportion(f.expert_share, static_cast<std::int64_t>(N));
      std::vector<std::int32_t> items;
      items.reserve(N);
      for (std::size_t e = 0; e < counts.size(); ++e) items.insert(items.end(), static_cast<std::size_t>(counts[e]), static_cast<std::int32_t>(e));
      return items;
    }
  }
  throw std::invalid_argument("planned_items: a forecast of kind none plans nothing");
}

std::int64_t error_target(ErrorModel model, double eps, std::int64_t bottleneck_load, std::int64_t total, int gpus) {
  if (gpus <= 0) throw std::invalid_argument("error_target: no GPUs");
  const double e = std::max(0.0, eps);
  const double avg = static_cast<double>(total) / gpus;
  std::int64_t target = bottleneck_load;
  if (model == ErrorModel::kTypical) target = ceil_measured((1.0 + e) * avg);
  if (model == ErrorModel::kPessimistic) target = ceil_measured(avg + e * static_cast<double>(total));
  return std::max(bottleneck_load, std::min(target, total));
}

ErrorRealisation apply_compute_error(ErrorModel model, double eps, const std::vector<std::int32_t>& item_expert,
                                     const std::vector<std::vector<int>>& gpus_of_expert, std::vector<int>& gpu_of_item,
                                     int gpus, const std::vector<char>& prefer) {
  ErrorRealisation out;
  out.gpu_load = loads_of(gpu_of_item, gpus);
  if (gpus <= 0) return out;
  auto& L = out.gpu_load;
  const int b = static_cast<int>(std::max_element(L.begin(), L.end()) - L.begin());  // first maximum
  out.bottleneck = b;
  out.target = error_target(model, eps, L[b], static_cast<std::int64_t>(item_expert.size()), gpus);
  std::int64_t need = out.target - L[b];
  if (need == 0) return out;

  // Candidates per donor GPU: its items of experts b also hosts, preferred ones first.
  std::vector<char> on_b(gpus_of_expert.size(), 0);
  for (std::size_t e = 0; e < gpus_of_expert.size(); ++e) on_b[e] = hosts(gpus_of_expert, static_cast<int>(e), b);
  std::vector<std::vector<std::size_t>> cand(static_cast<std::size_t>(gpus));
  for (const bool preferred : {true, false})
    for (std::size_t i = 0; i < item_expert.size(); ++i) {
      const bool p = !prefer.empty() && prefer[i];
      if (p == preferred && gpu_of_item[i] != b && on_b[static_cast<std::size_t>(item_expert[i])])
        cand[static_cast<std::size_t>(gpu_of_item[i])].push_back(i);
    }
  // One item at a time from the most loaded donor (lowest index on ties: the pair's second
  // member is −g), so the remaining GPUs stay as even as they were.
  std::priority_queue<std::pair<std::int64_t, int>> donors;
  std::vector<std::size_t> next(static_cast<std::size_t>(gpus), 0);
  for (int g = 0; g < gpus; ++g)
    if (!cand[static_cast<std::size_t>(g)].empty()) donors.emplace(L[g], -g);
  while (need > 0 && !donors.empty()) {
    const int g = -donors.top().second;
    donors.pop();
    const auto ug = static_cast<std::size_t>(g);
    gpu_of_item[cand[ug][next[ug]++]] = b;
    --L[ug];
    ++L[static_cast<std::size_t>(b)];
    --need;
    ++out.moved;
    if (next[ug] < cand[ug].size()) donors.emplace(L[ug], -g);
  }
  out.shortfall = need;
  return out;
}

void place_unpinned(const std::vector<std::int32_t>& item_expert, const std::vector<std::vector<int>>& gpus_of_expert,
                    std::vector<int>& gpu_of_item, int gpus) {
  std::vector<std::int64_t> load = loads_of(gpu_of_item, gpus);
  std::vector<std::vector<std::size_t>> open(gpus_of_expert.size());
  for (std::size_t i = 0; i < item_expert.size(); ++i)
    if (gpu_of_item[i] < 0) open[static_cast<std::size_t>(item_expert[i])].push_back(i);
  std::vector<std::size_t> order;
  for (std::size_t e = 0; e < open.size(); ++e)
    if (!open[e].empty()) order.push_back(e);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (gpus_of_expert[a].size() != gpus_of_expert[b].size()) return gpus_of_expert[a].size() < gpus_of_expert[b].size();
    return open[a].size() > open[b].size();
  });
  for (const std::size_t e : order) {
    const auto& h = gpus_of_expert[e];
    if (h.empty()) throw std::invalid_argument("place_unpinned: expert " + std::to_string(e) + " has no host");
    for (const std::size_t i : open[e]) {
      int best = h.front();
      for (const int g : h)
        if (load[static_cast<std::size_t>(g)] < load[static_cast<std::size_t>(best)] ||
            (load[static_cast<std::size_t>(g)] == load[static_cast<std::size_t>(best)] && g < best))
          best = g;
      gpu_of_item[i] = best;
      ++load[static_cast<std::size_t>(best)];
    }
  }
}

Dispatch items_to_dispatch(const LayerRouting& r, const std::vector<int>& home, const std::vector<int>& compute_gpu,
                           const std::vector<int>& sits_on, int gpus, int experts) {
  Dispatch d(gpus, experts);
  const bool from_home = sits_on.empty();
  if (!from_home) d.gather.assign(static_cast<std::size_t>(gpus), std::vector<std::int64_t>(static_cast<std::size_t>(gpus), 0));
  for (std::int64_t t = 0; t < r.num_tokens; ++t)
    for (int s = 0; s < r.top_k; ++s) {
      const auto i = static_cast<std::size_t>(t * r.top_k + s);
      const int c = compute_gpu[i];
      const int h = home[static_cast<std::size_t>(t)];
      ++d.load[c][r.experts[i]];
      if (from_home) {
        ++d.send[h][c];
      } else {
        if (sits_on[i] != c) ++d.send[sits_on[i]][c];
        ++d.gather[c][h];
      }
    }
  return d;
}

ForecastDispatch dispatch_on_forecast(const Forecast& f, const LayerRouting& r, const std::vector<int>& home,
                                      const CopyBudget& budget) {
  const int G = static_cast<int>(budget.memory_bytes.size());
  const int E = static_cast<int>(budget.placement.size());
  const std::vector<std::int32_t>& truth = r.experts;
  ForecastDispatch out{Dispatch(G, E), budget.placement, std::vector<int>(truth.size(), -1), {}, {}, 0};
  if (f.kind == Forecast::Kind::kNone) {
    // Nothing is known before routing, so nothing can be copied ahead of time: static-ep.
    for (std::size_t i = 0; i < truth.size(); ++i)
      out.compute_gpu[i] = budget.placement[static_cast<std::size_t>(truth[i])].front();
    out.error = apply_compute_error(ErrorModel::kOptimistic, 0.0, truth, budget.placement, out.compute_gpu, G);
    out.dispatch = items_to_dispatch(r, home, out.compute_gpu, {}, G, E);
    return out;
  }

  const std::vector<std::int32_t> planned = planned_items(f, r);
  const Duplication dup =
      duplicate_experts(planned, budget.placement, budget.memory_bytes, budget.expert_bytes, budget.max_copies);
  out.gpus_of_expert = dup.gpus_of_expert;

  std::vector<int>& c = out.compute_gpu;
  const bool tokens = f.kind == Forecast::Kind::kTokens;
  std::vector<char> wrong;  // kTokens: the errors of §3.3, the mispredicted selections
  if (tokens) {
    wrong.resize(truth.size());
    for (std::size_t i = 0; i < truth.size(); ++i) {
      wrong[i] = planned[i] != truth[i];
      out.mispredicted += wrong[i];
      // A selection stays where it was sent when that GPU hosts its true expert (always when
      // it was predicted right).
      if (hosts(dup.gpus_of_expert, truth[i], dup.gpu_of_item[i])) c[i] = dup.gpu_of_item[i];
    }
  } else {
    c = fill_planned_slots(truth, planned, dup, G);
  }
  place_unpinned(truth, dup.gpus_of_expert, c, G);

  // kTokens: the mispredicted selections move onto b first (a forwarded one only changes where
  // its transfer goes; under the pessimistic model it already sits on b). A correctly predicted
  // one moved onto b must then travel there from where it sits.
  out.error = apply_compute_error(f.error_model, f.error, truth, dup.gpus_of_expert, c, G, wrong);

  if (tokens) {
    out.sits_on = dup.gpu_of_item;
    if (f.error_model == ErrorModel::kPessimistic)
      for (std::size_t i = 0; i < truth.size(); ++i)
        if (wrong[i]) out.sits_on[i] = out.error.bottleneck;
  }
  out.dispatch = items_to_dispatch(r, home, c, out.sits_on, G, E);
  out.dispatch.copies = dup.copies;
  out.dispatch.copies_start = CopyStart::kLayerStart;  // the forecast precedes attention (§3.1)
  return out;
}

}  // namespace moesim
