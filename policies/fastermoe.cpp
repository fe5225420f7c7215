// fastermoe: expert shadowing on top of the static layout, as HarMoEny runs FasterMoE as a
// baseline (§III "Shortcomings of existing solutions", §V-A). Per batch and layer, once the gate
// has run, popular experts are broadcast from their owner to every other GPU and their
// selections are computed where the token already lives; the other experts' selections travel
// to their owner over the barrier all-to-all, as in static-ep.
//
// Which experts are popular: by default FasterMoE's data-volume comparison — shadow expert e
// when the bytes its selections would move across GPUs (scatter to the owner and gather back)
// exceed the bytes of sending its weights to the G - 1 other GPUs. With `threshold: x > 0`,
// every expert whose load exceeds x times the mean load per expert is shadowed instead.
// Candidates are taken most loaded first; each shadowed expert takes a buffer on every GPU but
// its owner, so the memory headroom left by the static layout bounds how many fit (HarMoEny
// §V-B: "the extent of the expert shadowing is constrained by the GPU memory"), as does
// `max_shadowed`. A candidate that does not fit is skipped and lighter ones are still tried.
//
// The broadcast starts after every GPU has routed (the decision needs the gate output); the
// engine times it on the copy engines and each GPU's experts wait for their copies.
#include <algorithm>
#include <numeric>

#include "models/model_spec.hpp"
#include "models/operators.hpp"
#include "policies/expert_copies.hpp"

namespace moesim {
namespace {

class FasterMoe final : public StaticLayoutWithCopies {
 public:
  bool accepts_counts() const override { return true; }
  explicit FasterMoe(const ParamSet& p)
      : StaticLayoutWithCopies(p.get_string("placement")),
        threshold_(p.get_float("threshold")),
        max_shadowed_(p.get_int("max_shadowed")) {}

 protected:
  Dispatch dispatch(const PolicyContext& ctx, const MoeLayerInput& in) override {
    const LayerRouting& r = *in.routing;
    const auto& home = *in.token_home;
    const int G = ctx.cluster.num_gpus();
    const int E = ctx.model.experts;
    const std::vector<char> shadow = shadowed(ctx, in);

    Dispatch d(G, E);
    for_each_selection(r, home, [&](int h, int e, std::int64_t n) {
      const int g = shadow[e] ? h : owner()[e];  // shadowed: computed where the token lives
      d.send[h][g] += n;
      d.load[g][e] += n;
    });
    for (int e = 0; e < E; ++e) {
      if (!shadow[e]) continue;
      for (int g = 0; g < G; ++g)
        if (g != owner()[e]) d.copies.push_back(WeightCopy{e, owner()[e], g});
    }
    d.copies_start = CopyStart::kAfterRouting;
    note_copies(d.copies);
    return d;
  }

 private:
  /// Which experts this layer shadows: candidates by the criterion, most loaded first, while
  /// every receiving GPU has room and max_shadowed allows.
  std::vector<char> shadowed(const PolicyContext& ctx, const MoeLayerInput& in) const {
    const LayerRouting& r = *in.routing;
    const auto& home = *in.token_home;
    const int G = ctx.cluster.num_gpus();
    const int E = ctx.model.experts;
    const std::vector<std::int64_t> load = r.expert_counts();
    std::vector<std::int64_t> remote(E, 0);  // selections whose token lives off the owner
    for_each_selection(r, home, [&](int h, int e, std::int64_t n) {
      if (h != owner()[e]) remote[e] += n;
    });
    const double mean = static_cast<double>(std::accumulate(load.begin(), load.end(), std::int64_t{0})) / E;
    const double eb = ctx.model.expert_bytes();
    const double tb = token_bytes(ctx.model);

    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return load[a] > load[b]; });
    std::vector<char> shadow(E, 0);
    std::vector<double> buffers(G, 0.0);  // bytes of shadow copies per GPU
    std::int64_t count = 0;
    for (const int e : order) {
      if (max_shadowed_ >= 0 && count >= max_shadowed_) break;
      const bool popular = threshold_ > 0.0
                               ? static_cast<double>(load[e]) > threshold_ * mean
                               : 2.0 * static_cast<double>(remote[e]) * tb > (G - 1) * eb;
      if (!popular) continue;
      bool fits = true;
      for (int g = 0; g < G; ++g)
        if (g != owner()[e] && buffers[g] + eb > headroom()[g]) fits = false;
      if (!fits) continue;
      for (int g = 0; g < G; ++g)
        if (g != owner()[e]) buffers[g] += eb;
      shadow[e] = 1;
      ++count;
    }
    return shadow;
  }

  double threshold_;
  std::int64_t max_shadowed_;
};

const bool registered = policies().add(
    "fastermoe",
    "FasterMoE shadowing (HarMoEny's baseline): popular experts broadcast to all GPUs after routing, "
    "their tokens computed at home",
    PolicyInfo{{placement_param(),
                ParamSpec{"threshold", ParamType::kFloat, "0", "",
                          "0 = shadow an expert when the bytes its selections would move across GPUs (scatter + "
                          "gather) exceed the bytes of broadcasting its weights to the other GPUs (FasterMoE); "
                          "x > 0 = shadow experts whose load exceeds x times the mean load per expert",
                          0.0, {}, {}},
                ParamSpec{"max_shadowed", ParamType::kInt, "-1", "experts",
                          "most experts shadowed per layer; -1 = as many as GPU memory holds", -1.0, 65536.0, {}}},
               [](const ParamSet& p) { return std::make_unique<FasterMoe>(p); }});

}  // namespace
}  // namespace moesim
