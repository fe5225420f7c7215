// moegps-dup: per-layer expert duplication by MoE-GPS Algorithm 1 (§3.1), acting on the layer's
// forecast (§3.2). Starting from the static layout, the heaviest expert on the most loaded GPU is
// copied to the least loaded one and half the gap of tokens follows it, until loads differ by at
// most one token or no move is possible, within C_max copies per expert and each GPU's memory
// headroom. Algorithm 1 sees the predicted map; the true selections are then computed within the
// placement it chose, under the forecast's error model (prediction_dispatch.cpp). Without a
// forecast nothing is known before routing, duplication cannot act ahead of time, and the policy
// is static-ep (§4: the "no prediction" baseline).
//
// The copies are timed, not assumed free: each new (e, g) is a peer copy from e's owner that may
// start at the layer start, because MoE-GPS runs the predictor before attention and argues the
// copy hides behind it (§3.1, §5 "Expert duplication's communication overhead"). Whether it does
// is the engine's answer for the given model and interconnect.
//
// Memory: the copies of one layer live in buffers reused from layer to layer, so the headroom
// M_g left by the static layout bounds one layer's copies, and the largest buffer any layer
// needed is reported with the static experts.
#include "policies/moegps_dup.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "models/model_spec.hpp"
#include "policies/prediction_dispatch.hpp"

namespace moesim {

Duplication duplicate_experts(const std::vector<std::int32_t>& item_expert,
                              const std::vector<std::vector<int>>& placement, std::vector<double> memory_bytes,
                              double expert_bytes, int max_copies) {
  const int G = static_cast<int>(memory_bytes.size());
  const int E = static_cast<int>(placement.size());
  Duplication out;
  out.gpus_of_expert = placement;
  std::vector<std::vector<char>> hosts(E, std::vector<char>(G, 0));
  std::vector<int> copies(E, 0);
  for (int e = 0; e < E; ++e) {
    if (placement[e].empty()) throw std::invalid_argument("duplicate_experts: expert " + std::to_string(e) + " has no host");
    for (const int g : placement[e]) {
      if (g < 0 || g >= G) throw std::invalid_argument("duplicate_experts: GPU " + std::to_string(g) + " out of range");
      if (!hosts[e][g]) ++copies[e];
      hosts[e][g] = 1;
    }
  }

  // Line 1: "assign each token t to any GPU g that hosts its expert". The pseudocode writes the
  // lowest such GPU, which is the only one when the placement is static (one host per expert).
  // When earlier replicas are kept (moegps-dup's keep_copies), piling every token on the lowest
  // host would make the loop copy to yet another GPU while a replica sits idle, so each item goes
  // to its expert's least-loaded host so far (lowest index on ties): the same for one host.
  // items[g][e]: the items of e on g, in item order, so "the first Δ tokens" of line 9 are defined.
  std::vector<std::vector<std::vector<std::int64_t>>> items(G, std::vector<std::vector<std::int64_t>>(E));
  out.gpu_of_item.resize(item_expert.size());
  out.gpu_load.assign(G, 0);
  for (std::size_t i = 0; i < item_expert.size(); ++i) {
    const int e = item_expert[i];
    int g = -1;
    for (const int h : placement[e])
      if (g < 0 || out.gpu_load[h] < out.gpu_load[g] || (out.gpu_load[h] == out.gpu_load[g] && h < g)) g = h;
    out.gpu_of_item[i] = g;
    items[g][e].push_back(static_cast<std::int64_t>(i));
    ++out.gpu_load[g];  // line 2
  }

  // Lines 3-10. Every pass moves k tokens, 1 <= k <= Δ = ceil(D/2) < D (D = L_h - L_c > 1),
  // from the most to the least loaded GPU, so Σ L_g² falls by 2k(D - k) > 0: the loop ends.
  std::vector<std::pair<int, int>> added;
  std::vector<std::int64_t>& L = out.gpu_load;
  while (G > 1) {
    // Line 4: std::max/min_element return the first extremum, i.e. the lowest index on ties.
    const int gh = static_cast<int>(std::max_element(L.begin(), L.end()) - L.begin());
    const int gc = static_cast<int>(std::min_element(L.begin(), L.end()) - L.begin());
    if (L[gh] - L[gc] <= 1) break;
    const std::int64_t delta = (L[gh] - L[gc] + 1) / 2;  // line 5

    // Line 6: the heaviest expert on g_h (lowest index on ties). Open point (2): when it cannot
    // reach g_c (line 7 refuses a copy), the next-heaviest is tried instead of stalling.
    std::vector<int> order;
    for (int e = 0; e < E; ++e)
      if (!items[gh][e].empty()) order.push_back(e);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return items[gh][a].size() > items[gh][b].size(); });
    int chosen = -1;
    for (const int e : order) {
      if (hosts[e][gc]) {
        chosen = e;
        break;
      }
      if (copies[e] < max_copies && expert_bytes <= memory_bytes[gc]) {  // lines 7-8
        hosts[e][gc] = 1;
        ++copies[e];
        memory_bytes[gc] -= expert_bytes;
        out.gpus_of_expert[e].push_back(gc);
        added.emplace_back(e, gc);
        chosen = e;
        break;
      }
      // Open point (1): line 9 would still move e's tokens to g_c, which lacks the weights; a
      // token only ever moves to a GPU holding its expert, so this expert stays put.
    }
    if (chosen < 0) break;  // no expert on g_h can move to g_c: stop, possibly unbalanced

    // Lines 9-10: the first Δ of e*'s tokens on g_h (capped by how many there are) go to g_c.
    auto& from = items[gh][chosen];
    auto& to = items[gc][chosen];
    const auto n = std::min<std::int64_t>(delta, static_cast<std::int64_t>(from.size()));
    std::vector<std::int64_t> merged;
    merged.reserve(to.size() + static_cast<std::size_t>(n));
    std::merge(from.begin(), from.begin() + n, to.begin(), to.end(), std::back_inserter(merged));
    for (auto it = from.begin(); it != from.begin() + n; ++it) out.gpu_of_item[static_cast<std::size_t>(*it)] = gc;
    from.erase(from.begin(), from.begin() + n);
    to = std::move(merged);
    L[gh] -= n;
    L[gc] += n;
  }
  out.copies = weight_copies(added, placement, out.gpus_of_expert);
  return out;
}

namespace {

class MoeGpsDup final : public StaticLayoutWithCopies {
 public:
  explicit MoeGpsDup(const ParamSet& p)
      : StaticLayoutWithCopies(p.get_string("placement")),
        max_copies_(p.get_int("max_copies")),
        keep_copies_(p.get_bool("keep_copies")),
        hide_copies_(p.get_string("copies") == "hidden") {}

  /// The static layout, its memory headroom, and what Algorithm 1 may spend per layer.
  void setup(const PolicyContext& ctx) override {
    if (max_copies_ == 0)
      throw InputError(SourceLocation{}, "moegps-dup: max_copies must be at least 1 (or -1 for the number of GPUs)");
    StaticLayoutWithCopies::setup(ctx);
    const int G = ctx.cluster.num_gpus();
    const int c_max = max_copies_ < 0 ? G : static_cast<int>(std::min<std::int64_t>(max_copies_, G));
    budget_ = CopyBudget{placement().gpus_of_expert, headroom(), ctx.model.expert_bytes(), c_max};
    // Kept replicas of every layer are resident at once, so each layer gets an even share of the
    // headroom; without keeping, one layer's copies reuse buffers and may use all of it.
    if (keep_copies_)
      for (double& m : budget_.memory_bytes) m /= std::max(1, ctx.model.num_moe_layers());
    held_.assign(static_cast<std::size_t>(ctx.model.num_moe_layers()), placement().gpus_of_expert);
    held_bytes_.assign(static_cast<std::size_t>(G), 0.0);
    peak_held_bytes_.assign(static_cast<std::size_t>(G), 0.0);
  }

  std::vector<double> expert_memory_bytes(const PolicyContext& ctx) const override {
    std::vector<double> bytes = StaticLayoutWithCopies::expert_memory_bytes(ctx);
    for (std::size_t g = 0; g < bytes.size() && g < peak_held_bytes_.size(); ++g) bytes[g] += peak_held_bytes_[g];
    return bytes;
  }

 protected:
  /// The layer's placement and dispatch from its forecast (none: static-ep); with `copies:
  /// hidden` the copies are accounted in memory but not moved.
  Dispatch dispatch(const PolicyContext& ctx, const MoeLayerInput& in) override {
    Dispatch d = place(ctx, in);
    // MoE-GPS §5 argues a copy hides behind attention and leaves it out of the layer's time.
    if (hide_copies_) d.copies.clear();
    return d;
  }

 private:
  Dispatch place(const PolicyContext& ctx, const MoeLayerInput& in) {
    const Forecast none;
    const Forecast& f = in.forecast ? *in.forecast : none;
    if (!keep_copies_) {
      ForecastDispatch fd = dispatch_on_forecast(f, *in.routing, *in.token_home, budget_);
      note_copies(fd.dispatch.copies);
      return std::move(fd.dispatch);
    }
    // MoE-GPS §5: "expert weights are static across inputs". Algorithm 1 runs from the static
    // layout as the paper specifies; only the hosts of its placement that this layer does not
    // already hold are copied (and timed), and that placement is kept for the next batch. A
    // steady forecast therefore copies once; replicas the placement drops are freed.
    ForecastDispatch fd = dispatch_on_forecast(f, *in.routing, *in.token_home, budget_);
    auto& held = held_[static_cast<std::size_t>(in.moe_index)];
    fd.dispatch.copies = weight_copies(new_hosts(held, fd.gpus_of_expert), held, fd.gpus_of_expert);
    const std::vector<double> before = replica_bytes(held, ctx.model.expert_bytes());
    const std::vector<double> after = replica_bytes(fd.gpus_of_expert, ctx.model.expert_bytes());
    // During the layer a GPU holds its earlier replicas plus this layer's new copies; the ones
    // the new placement dropped are freed after it.
    std::vector<double> arriving(held_bytes_.size(), 0.0);
    for (const WeightCopy& c : fd.dispatch.copies) arriving[static_cast<std::size_t>(c.dst_gpu)] += ctx.model.expert_bytes();
    for (std::size_t g = 0; g < after.size(); ++g) {
      peak_held_bytes_[g] = std::max(peak_held_bytes_[g], held_bytes_[g] + arriving[g]);
      held_bytes_[g] += after[g] - before[g];
    }
    held = fd.gpus_of_expert;
    return std::move(fd.dispatch);
  }

  /// Bytes of the non-static replicas in `hosts`, per GPU.
  std::vector<double> replica_bytes(const std::vector<std::vector<int>>& hosts, double expert_bytes) const {
    std::vector<double> bytes(held_bytes_.size(), 0.0);
    for (std::size_t e = 0; e < hosts.size(); ++e)
      for (const int g : hosts[e])
        if (owner()[e] != g) bytes[static_cast<std::size_t>(g)] += expert_bytes;
    return bytes;
  }

  std::int64_t max_copies_;
  bool keep_copies_;
  bool hide_copies_;
  CopyBudget budget_;
  std::vector<std::vector<std::vector<int>>> held_;  ///< per MoE layer: hosts of each expert now
  std::vector<double> held_bytes_;                   ///< per GPU: replicas held over all layers
  std::vector<double> peak_held_bytes_;              ///< per GPU: the most held at once
};

const bool registered = policies().add(
    "moegps-dup",
    "MoE-GPS Alg. 1: per-layer expert duplication from the layer's forecast (none: static-ep), within max_copies "
    "and memory headroom; prediction error per the forecast's error model",
    PolicyInfo{{placement_param(),
                ParamSpec{"max_copies", ParamType::kInt, "-1", "copies",
                          "C_max: most GPUs holding one expert in a layer, its owner included; -1 = the number "
                          "of GPUs",
                          -1.0, 1e6, {}},
                ParamSpec{"keep_copies", ParamType::kBool, "true", "",
                          "true: replicas a layer used stay resident for the next batch (MoE-GPS §5: expert "
                          "weights are static across inputs), each layer within an even share of the memory "
                          "headroom, and only new replicas are copied; false: every batch copies its replicas "
                          "again into buffers reused from layer to layer",
                          {}, {}, {}},
                ParamSpec{"copies", ParamType::kString, "timed", "",
                          "timed: each copy is a peer transfer from the expert's owner at the layer start, on the "
                          "network; hidden: copies take no time (MoE-GPS §5 assumes them hidden behind "
                          "attention), memory is still accounted",
                          {}, {}, {"timed", "hidden"}}},
               [](const ParamSet& p) { return std::make_unique<MoeGpsDup>(p); }});

}  // namespace
}  // namespace moesim
