// even-split: every expert on every GPU, each expert's selections split evenly over the GPUs
// (HarMoEny §V-C2, "Even Split": "if there are a tokens for expert 0 and four GPUs then a/4 tokens
// will be sent to each of the four GPUs ... perfect load balance across all experts at the cost of
// replication of all experts across all the GPUs").
//
// Split: expert e's n_e selections get quotas ⌊n_e/G⌋ per GPU, and the n_e mod G extra ones go to
// GPUs in a rotation carried from expert to expert, so per-expert quotas differ by at most one and
// so do the GPUs' totals. A selection stays on its token's home GPU while that GPU's quota for the
// expert lasts; the rest fill the other GPUs' quotas, GPUs in order, tokens in order. Dropless.
//
// Weights (`weights`): `resident` keeps all E experts of every MoE layer on every GPU; `stream`
// keeps a pool of expert buffers per GPU (as many as fit beside the non-expert weights, KV cache
// and activations, at most E, at least 2) and fetches every expert a GPU has selections for from
// host memory, asynchronously on the host-to-device copy engine, into a buffer freed by a finished
// expert (the mechanism of HarMoEny §IV-C; §V-C2 notes even-split's cost is that "each GPU has to
// load and execute every expert"). `auto` is resident when that fits in GPU memory, else stream.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "models/model_spec.hpp"
#include "policies/expert_parallel.hpp"
#include "policies/memory.hpp"
#include "policies/quota_dispatch.hpp"

namespace moesim {

namespace {

class EvenSplit final : public ExpertParallelPolicy {
 public:
  bool accepts_counts() const override { return true; }
  explicit EvenSplit(const ParamSet& p) : weights_(p.get_string("weights")) {}

  void setup(const PolicyContext& ctx) override {
    const int G = ctx.cluster.num_gpus(), E = ctx.model.experts;
    all_gpus_.assign(E, {});
    for (auto& g : all_gpus_)
      for (int i = 0; i < G; ++i) g.push_back(i);
    buffers_.assign(G, 0);
    stream_ = weights_ == "stream";
    if (weights_ == "auto") {
      stream_ = false;
      const auto free = memory_headroom(*this, ctx);
      stream_ = std::any_of(free.begin(), free.end(), [](double b) { return b < 0.0; });
    }
    if (!stream_) return;
    // Buffers: what is left with no expert weights resident, in whole experts.
    const auto free = memory_headroom(*this, ctx);
    const double eb = ctx.model.expert_bytes();
    for (int g = 0; g < G; ++g) {
      const double fit = std::floor(std::max(0.0, free[g]) / eb);
      buffers_[g] = static_cast<int>(std::min(fit, static_cast<double>(E)));
      if (buffers_[g] < 2)
        throw InputError(SourceLocation{},
                         "even-split: streaming expert weights needs at least 2 expert buffers per GPU, but GPU " +
                             std::to_string(g) + " has room for " + std::to_string(buffers_[g]) + " (" + gigabytes(free[g]) +
                             " left beside the other weights, KV cache and activations; " + gigabytes(eb) + " per expert)");
    }
  }

  std::vector<double> expert_memory_bytes(const PolicyContext& ctx) const override {
    const int G = ctx.cluster.num_gpus();
    const double eb = ctx.model.expert_bytes();
    std::vector<double> bytes(G);
    for (int g = 0; g < G; ++g)
      bytes[g] = stream_ ? (g < static_cast<int>(buffers_.size()) ? buffers_[g] : 0) * eb
                         : eb * ctx.model.experts * ctx.model.num_moe_layers();
    return bytes;
  }

 protected:
  Dispatch dispatch(const PolicyContext& ctx, const MoeLayerInput& in) override {
    const int G = ctx.cluster.num_gpus(), E = ctx.model.experts;
    const std::vector<std::int64_t> counts = in.routing->expert_counts();
    std::vector<std::vector<std::int64_t>> quota(E);
    int rotation = 0;  // where the next expert's extra selections start
    for (int e = 0; e < E; ++e) {
      quota[e] = even_quotas(counts[e], G, rotation);
      rotation = static_cast<int>((rotation + counts[e] % G) % G);
    }
    Dispatch d(G, E);
    assign_home_first(*in.routing, *in.token_home, all_gpus_, quota, d);
    if (!stream_) return d;
    // Every expert with selections is fetched, heaviest first: the longest kernels start
    // soonest and the later fetches hide behind them.
    for (int g = 0; g < G; ++g) {
      for (int e = 0; e < E; ++e)
        if (d.load[g][e] > 0) d.fetch[g].push_back(e);
      std::stable_sort(d.fetch[g].begin(), d.fetch[g].end(),
                       [&](int a, int b) { return d.load[g][a] > d.load[g][b]; });
      d.free_buffers[g] = buffers_[g];
    }
    d.fetch_mode = FetchMode::kAsync;
    return d;
  }

 private:
  std::string weights_;
  bool stream_ = false;
  std::vector<int> buffers_;                  ///< per GPU: expert buffers when streaming
  std::vector<std::vector<int>> all_gpus_;    ///< per expert: every GPU
};

const bool registered = policies().add(
    "even-split",
    "HarMoEny §V-C2 Even Split: every expert on every GPU, each expert's tokens split evenly (home first)",
    PolicyInfo{{ParamSpec{"weights", ParamType::kString, "auto", "",
                          "resident: all experts of all layers on every GPU; stream: per-GPU expert buffers "
                          "(as many as fit, at least 2) filled by async host fetches of every expert a GPU "
                          "computes; auto: resident if it fits in GPU memory, else stream",
                          {}, {}, {"auto", "resident", "stream"}}},
               [](const ParamSet& p) { return std::make_unique<EvenSplit>(p); }});

}  // namespace
}  // namespace moesim
