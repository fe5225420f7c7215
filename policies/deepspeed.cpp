// deepspeed: DeepSpeed-MoE with Tutel's dispatch kernels, as HarMoEny (§V-A) and MoEShard (§4.1
// "Baseline") run it as their baseline. Three things make it cost more than static-ep:
//
//  - A dense dispatch tensor. Each GPU's gate puts its selections into an [E, C, M] tensor,
//    every expert's slot padded to the capacity C (DeepSpeed sharded_moe.py, top1gating /
//    top2gating / topkgating). With `drop_tokens` (DeepSpeed's default) C = ceil(T/E · cf · k)
//    from the T local tokens, at least `min_capacity`, and selections beyond C are dropped; without
//    it C is the largest expert count on any GPU (all-reduced MAX), so nothing drops.
//  - All-to-alls that move that tensor: every GPU sends C rows per expert to the expert's owner
//    and gets them back in the combine, padding included.
//  - Expert GEMMs over the padded rows: the owner of expert e runs it over G · C rows (DeepSpeed's
//    Experts.forward loops over its local experts, each over its [G, C, M] chunk).
//
// So a layer costs E · C rows per GPU, whatever the routing: cf · T · k with drops, E × the
// largest expert count without — the cost follows the hottest expert on every GPU, which is why
// the papers' speedups over DeepSpeed grow with skew and batch (HarMoEny §V-B, MoEShard Fig. 3).
//
// HarMoEny (§V-A: "We set the capacity factor to prevent DeepSpeed from dropping tokens") is
// `drop_tokens: false`, the default here. MoEShard (§4.1) keeps the drops and sets the capacity
// factor to min(E, 50): `{drop_tokens: true, capacity_factor: min(E, 50)}`, the number written
// per expert count (e.g. `--set model.experts=16 --set policy.0.capacity_factor=16`).
//
// Placement: DeepSpeed's all-to-all splits the [E, C, M] tensor into G equal chunks along E, so
// GPU r holds experts [r·E/G, (r+1)·E/G): contiguous, as both papers' artifacts slice them
// (HarMoEny's text says round-robin; with padding the layout changes only which selections drop,
// never the time, since every GPU computes E/G experts of G · C rows).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "hardware/collectives.hpp"
#include "models/model_spec.hpp"
#include "policies/static_placement.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

/// DeepSpeed-MoE: capacity-padded dense dispatch, per-expert GEMMs over the padding.
class DeepSpeedMoe final : public StaticPlacementPolicy {
 public:
  explicit DeepSpeedMoe(const ParamSet& p)
      : StaticPlacementPolicy(p.get_string("placement")),
        capacity_factor_(p.get_float("capacity_factor")),
        drop_tokens_(p.get_bool("drop_tokens")),
        min_capacity_(p.get_int("min_capacity")) {}

  // Capacity and drops depend only on how many selections each GPU has per expert.
  bool accepts_counts() const override { return true; }

 protected:
  Dispatch dispatch(const PolicyContext& ctx, const MoeLayerInput& in) override {
    const LayerRouting& r = *in.routing;
    const int G = ctx.cluster.num_gpus();
    const int E = ctx.model.experts;
    std::vector<std::vector<std::int64_t>> local(G, std::vector<std::int64_t>(E, 0));
    for_each_selection(r, *in.token_home, [&](int g, int e, std::int64_t n) { local[g][e] += n; });
    const std::int64_t C = capacity(local, in.home_tokens, r.top_k, E);

    Dispatch d(G, E);
    d.rows.assign(G, std::vector<std::int64_t>(E, 0));
    d.per_expert_kernels = true;
    for (int g = 0; g < G; ++g)
      for (int e = 0; e < E; ++e) {
        // Each GPU keeps at most C selections per expert (its own gate decides) and sends the
        // whole C-row slot, filled or not.
        const std::int64_t kept = std::min(local[g][e], C);
        d.dropped += local[g][e] - kept;
        d.load[owner_[e]][e] += kept;
        d.send[g][owner_[e]] += C;
        d.rows[owner_[e]][e] += C;
      }
    return d;
  }

  // Without drops the capacity is agreed on by an all-reduce of each GPU's largest expert count
  // before the dispatch (top1gating's dist.all_reduce(new_capacity, MAX)).
  std::vector<TaskId> before_scatter(TaskGraph& plan, const PolicyContext& ctx, const MoeLayerInput& in,
                                     TaskId all_routed) override {
    const int G = ctx.cluster.num_gpus();
    if (drop_tokens_) return std::vector<TaskId>(static_cast<std::size_t>(G), all_routed);
    std::vector<int> gpus(static_cast<std::size_t>(G));
    std::iota(gpus.begin(), gpus.end(), 0);
    const TaskId dep[] = {all_routed};
    const TaskId agreed =
        add_ring_all_reduce(plan, ctx.cluster, gpus, kCountBytes, phase::kCollective, in.layer, dep);
    return std::vector<TaskId>(static_cast<std::size_t>(G), agreed);
  }

 private:
  static constexpr double kCountBytes = 8.0;  // one int64 capacity

  /// C for this layer. The all-to-all splits every GPU's tensor evenly (all_to_all_single), so
  /// all GPUs share one shape: with drops, from the largest local batch (DeepSpeed's data
  /// loader gives every rank the same); without, the all-reduced largest count.
  std::int64_t capacity(const std::vector<std::vector<std::int64_t>>& local, const std::vector<std::int64_t>& home,
                        int top_k, int E) const {
    if (!drop_tokens_) {
      // DeepSpeed caps this at the local token count; a count never exceeds it (an expert gets
      // each token at most once), so the cap is implied.
      std::int64_t c = 0;
      for (const auto& row : local) c = std::max(c, *std::max_element(row.begin(), row.end()));
      return c;
    }
    const std::int64_t tokens = home.empty() ? 0 : *std::max_element(home.begin(), home.end());
    if (tokens == 0) return 0;
    // _capacity(): ceil((num_tokens / num_experts) * capacity_factor * k), at least min_capacity.
    const double c = std::ceil(static_cast<double>(tokens) / E * capacity_factor_ * top_k);
    return std::max(min_capacity_, static_cast<std::int64_t>(c));
  }

  double capacity_factor_;
  bool drop_tokens_;
  std::int64_t min_capacity_;
};

const bool registered = policies().add(
    "deepspeed",
    "DeepSpeed-MoE + Tutel (HarMoEny's and MoEShard's baseline): dense dispatch padded to a capacity, "
    "all-to-alls and per-expert GEMMs over the padding",
    PolicyInfo{
        {placement_param(),
         ParamSpec{"capacity_factor", ParamType::kFloat, "1.0", "",
                   "with drop_tokens: every expert's slot holds C = ceil(tokens_per_gpu / E * cf * top_k) rows "
                   "(MoEShard sets cf = min(E, 50)); ignored without drop_tokens",
                   0.0, {}, {}},
         ParamSpec{"drop_tokens", ParamType::kBool, "false", "",
                   "true: selections beyond C are dropped (DeepSpeed's default, MoEShard); false: C = the largest "
                   "expert count on any GPU, agreed by an all-reduce, so nothing drops (HarMoEny)",
                   {}, {}, {}},
         ParamSpec{"min_capacity", ParamType::kInt, "4", "tokens",
                   "with drop_tokens: the least C (DeepSpeed's min_capacity)", 0.0, 1e9, {}}},
        [](const ParamSet& p) { return std::make_unique<DeepSpeedMoe>(p); }, warn_gpus_without_experts});

}  // namespace
}  // namespace moesim
