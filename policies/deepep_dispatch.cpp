#include "policies/deepep_dispatch.hpp"

#include <algorithm>
#include <numeric>

namespace moesim {

DeepEpParams deepep_params(const ModelSpec& m, MoeAllToAll kernel, int gpus, DeepEpOp op) {
  DeepEpParams p;
  p.kernel = kernel == MoeAllToAll::kDeepEpLowLatency ? DeepEpKernel::kLowLatency : DeepEpKernel::kNormal;
  p.op = op;
  p.hidden = static_cast<int>(m.hidden);
  p.top_k = m.top_k;
  p.experts = m.experts;
  p.ep = gpus;
  const DType math = m.expert_compute_dtype();
  p.fp8 = (math == DType::kFp8 || is_fp4(math)) && m.hidden % 128 == 0;
  return p;
}

std::vector<DeepEpGpuTraffic> deepep_layer_traffic(const PolicyContext& ctx, const MoeLayerInput& in, const Dispatch& d,
                                                   DeepEpOp op) {
  const int G = ctx.cluster.num_gpus();
  const int E = ctx.model.experts;
  // Tokens are laid out source by source (MoeLayerInput::token_home).
  std::vector<std::int64_t> first(static_cast<std::size_t>(G) + 1, 0);
  for (int g = 0; g < G; ++g) first[static_cast<std::size_t>(g) + 1] = first[static_cast<std::size_t>(g)] + in.home_tokens[static_cast<std::size_t>(g)];
  const std::int64_t T = first.back();
  std::vector<int> home(static_cast<std::size_t>(T));
  for (int g = 0; g < G; ++g)
    std::fill(home.begin() + first[static_cast<std::size_t>(g)], home.begin() + first[static_cast<std::size_t>(g) + 1], g);
  std::vector<std::vector<int>> dests(static_cast<std::size_t>(T));

  // Where each expert's selections go: the GPUs the Dispatch loads with it, each up to its load.
  std::vector<std::vector<int>> hosts(static_cast<std::size_t>(E));
  std::vector<std::vector<std::int64_t>> left(static_cast<std::size_t>(E));
  for (int g = 0; g < G; ++g)
    for (int e = 0; e < E; ++e)
      if (const std::int64_t n = d.load[static_cast<std::size_t>(g)][static_cast<std::size_t>(e)]; n > 0) {
        hosts[static_cast<std::size_t>(e)].push_back(g);
        left[static_cast<std::size_t>(e)].push_back(n);
      }
  std::vector<std::size_t> turn(static_cast<std::size_t>(E), 0);
  const auto gpu_for = [&](int e, int src) {
    auto& h = hosts[static_cast<std::size_t>(e)];
    auto& l = left[static_cast<std::size_t>(e)];
    if (h.empty()) return src;  // dropped by the policy (capacity): computed nowhere, sent nowhere
    std::size_t& i = turn[static_cast<std::size_t>(e)];
    for (std::size_t k = 0; k < h.size(); ++k, i = (i + 1) % h.size())
      if (l[i] > 0) {
        --l[i];
        return h[i];
      }
    return h[i];
  };
  std::int64_t calls = 0;
  std::vector<std::int64_t> cursor(static_cast<std::size_t>(G), 0);
  const LayerRouting& r = *in.routing;
  for_each_selection(r, *in.token_home, [&](int src, int e, std::int64_t n) {
    const std::int64_t own = in.home_tokens[static_cast<std::size_t>(src)];
    for (std::int64_t j = 0; j < n; ++j) {
      std::int64_t t = 0;
      if (r.by_count) {
        if (own <= 0) return;
        t = first[static_cast<std::size_t>(src)] + cursor[static_cast<std::size_t>(src)]++ % own;
      } else {
        t = calls++ / r.top_k;
      }
      dests[static_cast<std::size_t>(t)].push_back(gpu_for(e, src));
    }
  });
  const DeepEpParams p = deepep_params(ctx.model, ctx.alltoall, G, op);
  return deepep_traffic(ctx.cluster, p, home, dests);
}

std::vector<double> deepep_layer_us(const PolicyContext& ctx, const MoeLayerInput& in, const Dispatch& d, DeepEpOp op) {
  std::vector<double> us;
  for (const DeepEpGpuTraffic& t : deepep_layer_traffic(ctx, in, d, op)) us.push_back(t.finish_us);
  return us;
}

}  // namespace moesim
