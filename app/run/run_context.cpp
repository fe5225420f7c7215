// The pieces every run shares: routing, policy and predictor contexts with their seeded
// profiling and training windows, and the memory check located at a policy's entry.
#include "app/run/run_context.hpp"

#include "core/rng.hpp"

namespace moesim {

void check_fits(const MemoryEstimate& e, const Cluster& c, const PolicyEntry& entry) {
  const std::vector<double> total = e.total();
  for (std::size_t g = 0; g < total.size(); ++g) {
    if (total[g] <= c.spec().gpu.memory_bytes) continue;
    throw InputError(entry.where,
                     "policy '" + entry.label + "': the model does not fit in GPU memory: GPU " + std::to_string(g) +
                         " needs " + gigabytes(total[g]) + " (weights " + gigabytes(e.weights[g]) + ", KV cache " +
                         gigabytes(e.kv_cache[g]) + ", activations " + gigabytes(e.activations[g]) + ") but has " +
                         gigabytes(c.spec().gpu.memory_bytes) + " (" + c.spec().gpu.name + ")");
  }
}

// Profiling batches (PolicyContext::profile_routing) come from a stream of their own
// (Stream::kProfileRouting), so that a profiled placement never sees the routing it will be
// measured on.

std::unique_ptr<RoutingModel> make_routing(const Scenario& s) {
  if (s.model.experts == 0) {
    // A dense model has no MoE layer, so nothing ever draws from its routing: one expert that
    // every token would pick stands in, whatever the routing section says.
    RoutingContext rc = routing_context(s);
    rc.experts = 1;
    rc.top_k = 1;
    return std::make_unique<TableRoutingModel>(rc, std::vector<std::vector<double>>{{1.0}});
  }
  return routing_models().get(s.routing.kind).value.make(s.routing.params, routing_context(s), s.routing.where);
}

PolicyContext policy_context(const Scenario& s, const Cluster& cluster, const RoutingModel& routing,
                             const PrefillWorkload* shape) {
  const PrefillWorkload& w = shape ? *shape : s.workload;
  PolicyContext ctx{s.model, cluster, w};
  ctx.seed = s.seed;
  ctx.profile_routing = [&s, &routing, &w](int i, int moe_layer) {
    Rng rng = Rng::derive(s.seed, Stream::kProfileRouting, static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(moe_layer));
    return routing.route(-(i + 1), moe_layer, w.tokens_per_batch(), rng);
  };
  return ctx;
}

// A predictor's offline training window (PredictorContext::training_routing) is drawn from a
// stream of its own, apart from both the simulated batches and the policies' profiling window, so
// an estimate is never scored on the data it was fit on (MoE-GPS §3.2.1 splits train and test).
// Training batches use routing batch indices -1000000, -1000001, ...: to a per-batch routing
// model (e.g. `fluctuating`, or token ids in `token-conditioned`) they are offline batches of
// the same traffic, distinct from the simulated batches and from the profiling window (-1, -2, ...).

PredictorContext predictor_context(const Scenario& s, const Cluster& cluster, const RoutingModel& routing,
                                   const PrefillWorkload* shape) {
  const PrefillWorkload& w = shape ? *shape : s.workload;
  PredictorContext ctx{s.model, w, cluster.num_gpus()};
  ctx.training_routing = [&s, &routing, &w](int i, int moe_layer) {
    Rng rng = Rng::derive(s.seed, Stream::kTrainingRouting, static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(moe_layer));
    return routing.route(-(1000000 + i), moe_layer, w.tokens_per_batch(), rng);
  };
  return ctx;
}

bool count_level_routing(const Scenario& s, const RoutingModel& routing) {
  if (s.routing.token_draws || !routing.supports_counts()) return false;
  for (const auto& entry : s.policies) {
    // A layer-queue policy (not stepped) draws its own routing, token by token.
    const PolicyInfo& info = policies().get(entry.name).value;
    if (!info.supports.stepped || !info.make(entry.params)->accepts_counts()) return false;
  }
  for (const auto& entry : s.predictors)
    if (predictors().get(entry.name).value.make(entry.params)->needs_tokens()) return false;
  return true;
}

}  // namespace moesim
