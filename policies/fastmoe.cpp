// fastmoe: FastMoE (He et al. 2021) as HarMoEny runs it as a baseline (§V-A: "FastMoE also uses
// expert parallelism"), with FasterMoE's shadowing and smart schedule off. Per layer:
//  - count_by_gate: each GPU counts its selections per expert and exchanges the counts with an
//    all-to-all (fmoe_cuda.expert_exchange), so every GPU can size its receive buffer;
//  - global_scatter: a variable-size all-to-all of exactly the selections (dropless, no padding);
//  - expert_fn: a loop over the local experts, each expert's GEMMs launched on their own rather
//    than one grouped GEMM;
//  - global_gather: the reverse all-to-all, then the merge at home.
// Static layout: FastMoE numbers its experts rank · num_expert + i, so GPU r holds a contiguous
// block (as HarMoEny's artifact slices them); `placement: round-robin` is what HarMoEny's text
// describes (§V-C2).
#include <numeric>

#include "hardware/collectives.hpp"
#include "models/model_spec.hpp"
#include "policies/static_placement.hpp"
#include "hardware/phase.hpp"

namespace moesim {
namespace {

/// FastMoE: dropless static expert parallelism with a count exchange and per-expert kernels.
class FastMoe final : public StaticPlacementPolicy {
 public:
  explicit FastMoe(const ParamSet& p) : StaticPlacementPolicy(p.get_string("placement")) {}

  bool accepts_counts() const override { return true; }

 protected:
  Dispatch dispatch(const PolicyContext& ctx, const MoeLayerInput& in) override {
    Dispatch d(ctx.cluster.num_gpus(), ctx.model.experts);
    for_each_selection(*in.routing, *in.token_home, [&](int g, int e, std::int64_t n) {
      d.send[g][owner_[e]] += n;
      d.load[owner_[e]][e] += n;
    });
    d.per_expert_kernels = true;
    return d;
  }

  // expert_exchange: GPU s sends GPU t one int64 count per expert t holds.
  std::vector<TaskId> before_scatter(TaskGraph& plan, const PolicyContext& ctx, const MoeLayerInput& in,
                                     TaskId all_routed) override {
    const int G = ctx.cluster.num_gpus();
    std::vector<int> gpus(static_cast<std::size_t>(G));
    std::iota(gpus.begin(), gpus.end(), 0);
    std::vector<std::vector<double>> bytes(G, std::vector<double>(G, 0.0));
    for (int s = 0; s < G; ++s)
      for (int t = 0; t < G; ++t)
        if (s != t) bytes[s][t] = kCountBytes * static_cast<double>(placement_.experts_on_gpu[t].size());
    return add_all_to_all(plan, ctx.cluster, gpus, bytes, phase::kCollective, in.layer,
                          std::vector<TaskId>(static_cast<std::size_t>(G), all_routed));
  }

 private:
  static constexpr double kCountBytes = 8.0;  // FastMoE's counts are int64
};

const bool registered = policies().add(
    "fastmoe",
    "FastMoE (HarMoEny's baseline): static placement, count exchange, variable-size all-to-all, "
    "one GEMM kernel per expert; dropless",
    PolicyInfo{{placement_param()}, [](const ParamSet& p) { return std::make_unique<FastMoe>(p); }, warn_gpus_without_experts});

}  // namespace
}  // namespace moesim
