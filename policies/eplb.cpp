// eplb: expert-parallel load balancing after DeepSeek EPLB (public algorithm, written anew here).
//
//  1. Replication: starting from one replica per expert, `redundant_experts` extra replicas are
//     added one at a time, each to the expert whose load per replica is currently highest.
//  2. Packing: the E + R replicas (each weighing its expert's load / its replica count) are packed
//     onto the G GPUs by balanced greedy bin-packing — heaviest replica first, onto the
//     least-loaded GPU that still has a free slot and, when one exists, does not already hold a
//     replica of the same expert. Every GPU gets exactly (E + R) / G slots.
//     `packing: hierarchical` first packs experts (as groups of one; the model declares no
//     coarser expert groups) onto nodes by the same greedy rule, replicates within each node
//     (R / nodes extra replicas per node) and then packs each node's replicas onto its GPUs, as
//     EPLB does when the node count divides the groups. When it does not (E or R not divisible
//     by the node count) it falls back to global packing, as EPLB does. With one node both agree.
//
// Load signal: the true per-expert selection counts of the layer's routing in the batch that
// triggers a (re)placement. Expert-load predictors are not wired in yet; when they are, their
// forecast replaces these counts.
//
// Rebalancing: each MoE layer has its own placement, computed from that layer's routing in the
// first batch it sees and then kept (static); that first placement is the model's initial load
// and is not timed. With `rebalance_every: n > 0` it is recomputed from the current batch's
// routing every n batches, and the re-placement moves weights: every replica placed on a GPU that
// did not hold its expert before is a peer copy from a GPU that did (preferring one that keeps
// it, then the least busy sender). The copies may start at the layer start (the placement is
// decided ahead of the layer, from the load signal) and that GPU's experts wait for them, so a
// re-placement costs what the interconnect makes it cost.
//
// Dispatch: each expert's selections are split evenly over its replicas (quotas differ by at most
// one, extra selections to the earlier replicas). For locality, a selection first goes to a
// replica on the token's home GPU while that replica's quota lasts; the remaining selections then
// fill the other replicas' quotas in token order. Every selection goes to exactly one GPU; none
// is dropped.
#include <algorithm>
#include <map>
#include <numeric>
#include <string>

#include "models/model_spec.hpp"
#include "policies/eplb.hpp"
#include "policies/expert_parallel.hpp"
#include "policies/expert_copies.hpp"
#include "policies/quota_dispatch.hpp"

namespace moesim {
namespace {

/// Number of replicas per expert: R extra, each to the expert with the highest load per replica.
/// Ties go to the lower expert index.
std::vector<int> replicate(const std::vector<double>& load, int redundant) {
  std::vector<int> count(load.size(), 1);
  for (int i = 0; i < redundant; ++i) {
    std::size_t best = 0;
    for (std::size_t e = 1; e < load.size(); ++e)
      if (load[e] / count[e] > load[best] / count[best]) best = e;
    ++count[best];
  }
  return count;
}

/// Balanced greedy packing of weighted items into `bins` bins of exactly `slots` items each.
/// `kind[i]` tags items that should not share a bin (replicas of one expert); -1 for none.
/// Heaviest item first (ties: lower index), onto the least-loaded bin with a free slot, preferring
/// bins holding no item of the same kind. Returns the bin of each item.
std::vector<int> balanced_packing(const std::vector<double>& weight, const std::vector<int>& kind,
                                  int bins, int slots) {
  std::vector<std::size_t> order(weight.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return weight[a] > weight[b]; });
  std::vector<double> bin_load(bins, 0.0);
  std::vector<int> bin_used(bins, 0);
  std::vector<std::vector<int>> bin_kinds(bins);
  std::vector<int> bin_of(weight.size(), -1);
  for (const std::size_t i : order) {
    int best = -1;
    bool best_clash = true;
    for (int b = 0; b < bins; ++b) {
      if (bin_used[b] >= slots) continue;
      const bool clash = kind[i] >= 0 && std::find(bin_kinds[b].begin(), bin_kinds[b].end(),
                                                   kind[i]) != bin_kinds[b].end();
      if (best < 0 || (best_clash && !clash) || (clash == best_clash && bin_load[b] < bin_load[best])) {
        best = b;
        best_clash = clash;
      }
    }
    bin_of[i] = best;
    bin_load[best] += weight[i];
    ++bin_used[best];
    bin_kinds[best].push_back(kind[i]);
  }
  return bin_of;
}

/// Replicates `experts` (with their loads) by `redundant` and packs the replicas onto `gpus`
/// (slots each). Appends each replica's GPU to `replicas[expert]`.
void replicate_and_pack(const std::vector<int>& experts, const std::vector<double>& load, int redundant,
                        const std::vector<int>& gpus, int slots, std::vector<std::vector<int>>& replicas) {
  std::vector<double> sub_load;
  for (const int e : experts) sub_load.push_back(load[e]);
  const std::vector<int> count = replicate(sub_load, redundant);
  std::vector<double> weight;
  std::vector<int> kind;
  for (std::size_t i = 0; i < experts.size(); ++i)
    for (int c = 0; c < count[i]; ++c) {
      weight.push_back(sub_load[i] / count[i]);
      kind.push_back(experts[i]);
    }
  const std::vector<int> bin = balanced_packing(weight, kind, static_cast<int>(gpus.size()), slots);
  for (std::size_t i = 0; i < bin.size(); ++i) replicas[kind[i]].push_back(gpus[bin[i]]);
}

}  // namespace

std::vector<std::vector<int>> eplb_place(const std::vector<double>& load, int redundant, int gpus, int nodes,
                                         bool hierarchical) {
  const int E = static_cast<int>(load.size());
  const int slots = (E + redundant) / gpus;
  std::vector<std::vector<int>> replicas(E);
  if (hierarchical && E % nodes == 0 && redundant % nodes == 0) {
    // Experts onto nodes (E / nodes each), balanced by load; then replicate and pack per node.
    const std::vector<int> node_of = balanced_packing(load, std::vector<int>(E, -1), nodes, E / nodes);
    const int per_node = gpus / nodes;
    for (int n = 0; n < nodes; ++n) {
      std::vector<int> experts, node_gpus;
      for (int e = 0; e < E; ++e)
        if (node_of[e] == n) experts.push_back(e);
      for (int g = n * per_node; g < (n + 1) * per_node; ++g) node_gpus.push_back(g);
      replicate_and_pack(experts, load, redundant / nodes, node_gpus, slots, replicas);
    }
  } else {
    std::vector<int> experts(E), all_gpus(gpus);
    std::iota(experts.begin(), experts.end(), 0);
    std::iota(all_gpus.begin(), all_gpus.end(), 0);
    replicate_and_pack(experts, load, redundant, all_gpus, slots, replicas);
  }
  return replicas;
}

namespace {

class Eplb final : public ExpertParallelPolicy {
 public:
  bool accepts_counts() const override { return true; }
  explicit Eplb(const ParamSet& p)
      : redundant_option_(p.get_int("redundant_experts")),
        hierarchical_(p.get_string("packing") == "hierarchical"),
        rebalance_every_(p.get_int("rebalance_every")) {}

  void setup(const PolicyContext& ctx) override {
    const int E = ctx.model.experts;
    const int G = ctx.cluster.num_gpus();
    // Default: at least one replica per GPU, rounded up so that every GPU has the same number of
    // slots (G when G divides E; more when GPUs outnumber or do not divide the experts).
    redundant_ = redundant_option_ < 0 ? (E + G + G - 1) / G * G - E : static_cast<int>(redundant_option_);
    if ((E + redundant_) % G != 0)
      throw InputError(SourceLocation{},
                       "eplb: experts + redundant_experts (" + std::to_string(E) + " + " +
                           std::to_string(redundant_) + " = " + std::to_string(E + redundant_) +
                           ") must be divisible by the number of GPUs (" + std::to_string(G) +
                           ") so every GPU gets the same number of expert slots");
    slots_ = (E + redundant_) / G;
    layers_.clear();
  }

  std::vector<double> expert_memory_bytes(const PolicyContext& ctx) const override {
    // (E + R) / G expert copies per GPU in every MoE layer, whatever the placement.
    const double per_gpu = static_cast<double>(slots_) * ctx.model.expert_bytes() * ctx.model.num_moe_layers();
    return std::vector<double>(ctx.cluster.num_gpus(), per_gpu);
  }

 protected:
  Dispatch dispatch(const PolicyContext& ctx, const MoeLayerInput& in) override {
    const LayerRouting& r = *in.routing;
    const auto& home = *in.token_home;
    const int E = ctx.model.experts;
    const std::vector<std::int64_t> counts = r.expert_counts();
    Dispatch d(ctx.cluster.num_gpus(), E);
    auto it = layers_.find(in.moe_index);
    if (it == layers_.end()) {
      it = layers_.emplace(in.moe_index, LayerPlacement{in.batch, place(ctx, counts)}).first;
    } else if (rebalance_every_ > 0 && in.batch >= it->second.batch + rebalance_every_) {
      LayerPlacement next{in.batch, place(ctx, counts)};
      const auto& before = it->second.replicas;
      d.copies = weight_copies(new_hosts(before, next.replicas), before, next.replicas);
      d.copies_start = CopyStart::kLayerStart;
      it->second = std::move(next);
    }
    const auto& reps = it->second.replicas;

    // Even quotas per replica; the first (count mod replicas) replicas take one more.
    std::vector<std::vector<std::int64_t>> quota(E);
    for (int e = 0; e < E; ++e) quota[e] = even_quotas(counts[e], static_cast<int>(reps[e].size()), 0);
    assign_home_first(r, home, reps, quota, d);
    return d;
  }

 private:
  struct LayerPlacement {
    int batch = 0;                              ///< batch whose routing decided it
    std::vector<std::vector<int>> replicas;     ///< GPU of each replica, per expert
  };

  /// Replication and packing for one layer from its per-expert loads.
  std::vector<std::vector<int>> place(const PolicyContext& ctx, const std::vector<std::int64_t>& counts) const {
    const std::vector<double> load(counts.begin(), counts.end());
    return eplb_place(load, redundant_, ctx.cluster.num_gpus(), ctx.cluster.num_nodes(), hierarchical_);
  }

  std::int64_t redundant_option_;
  bool hierarchical_;
  std::int64_t rebalance_every_;
  int redundant_ = 0;
  int slots_ = 0;
  std::map<int, LayerPlacement> layers_;
};

const bool registered = policies().add(
    "eplb",
    "DeepSeek EPLB (public): redundant replicas for the heaviest experts, greedy balanced packing (global or hierarchical)",
    PolicyInfo{
        {ParamSpec{"redundant_experts", ParamType::kInt, "-1", "experts",
                   "extra expert replicas per MoE layer, each added to the expert with the highest "
                   "load per replica; -1 = at least one per GPU, rounded up so that experts + "
                   "redundant_experts divides by the GPUs (= the GPU count when it divides the experts). "
                   "experts + redundant_experts must be divisible by the number of GPUs",
                   -1.0, 65536.0, {}},
         ParamSpec{"packing", ParamType::kString, "global", "",
                   "global: pack all replicas onto all GPUs; hierarchical: experts onto nodes first, "
                   "then replicate and pack within each node (falls back to global when the node "
                   "count does not divide experts and redundant_experts)",
                   {}, {}, {"global", "hierarchical"}},
         ParamSpec{"rebalance_every", ParamType::kInt, "0", "batches",
                   "0 = placement from each MoE layer's routing in the first batch, then kept; "
                   "n > 0 = recomputed from the current routing every n batches, with the weights of "
                   "newly placed replicas copied from a GPU that held them (timed)",
                   0.0, {}, {}}},
        [](const ParamSet& p) { return std::make_unique<Eplb>(p); }});

}  // namespace
}  // namespace moesim
