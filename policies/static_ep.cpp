// static-ep: static expert placement with barrier all-to-all (HarMoEny §II, §V-A baselines:
// DeepSpeed, FastMoE). Each expert lives on exactly one GPU; every selection is sent to it.
// An optional capacity factor drops selections beyond ceil(cf · selections / E) per expert,
// in token order, as GShard/Switch-style capacity does.
#include <cmath>

#include "models/model_spec.hpp"
#include "policies/static_placement.hpp"

namespace moesim {
namespace {

class StaticExpertParallel final : public StaticPlacementPolicy {
 public:
  explicit StaticExpertParallel(const ParamSet& p)
      : StaticPlacementPolicy(p.get_string("placement")), capacity_factor_(p.get_float("capacity_factor")) {}

  bool accepts_counts() const override { return true; }

 protected:
  Dispatch dispatch(const PolicyContext& ctx, const MoeLayerInput& in) override {
    const LayerRouting& r = *in.routing;
    const auto& home = *in.token_home;
    Dispatch d(ctx.cluster.num_gpus(), ctx.model.experts);
    std::int64_t capacity = -1;
    if (capacity_factor_ > 0.0) {
      const double mean = static_cast<double>(r.num_tokens * r.top_k) / r.num_experts;
      capacity = static_cast<std::int64_t>(std::ceil(capacity_factor_ * mean));
    }
    std::vector<std::int64_t> taken(ctx.model.experts, 0);
    // Selections in token order: the first `capacity` of each expert are kept.
    for_each_selection(r, home, [&](int g, int e, std::int64_t n) {
      const std::int64_t kept = capacity >= 0 ? std::min(n, std::max<std::int64_t>(0, capacity - taken[e])) : n;
      d.dropped += n - kept;
      taken[e] += kept;
      d.send[g][owner_[e]] += kept;
      d.load[owner_[e]][e] += kept;
    });
    return d;
  }

 private:
  double capacity_factor_;
};

const bool registered = policies().add(
    "static-ep",
    "static expert placement (contiguous or round-robin), barrier all-to-all; optional capacity factor",
    PolicyInfo{
        {placement_param(),
         ParamSpec{"capacity_factor", ParamType::kFloat, "0", "",
                   "0 = dropless; otherwise each expert takes at most ceil(cf * selections / E) "
                   "selections per layer and the rest are dropped (reported as tokens_dropped)",
                   0.0, {}, {}}},
        [](const ParamSet& p) { return std::make_unique<StaticExpertParallel>(p); }, warn_gpus_without_experts});

}  // namespace
}  // namespace moesim
