#include "serving/batch_planner.hpp"

#include <stdexcept>

#include "models/operators.hpp"

namespace moesim {

std::vector<std::int64_t> sequences_per_gpu(std::int64_t batch_size, int gpus) {
  std::vector<std::int64_t> out(gpus);
  for (int g = 0; g < gpus; ++g) out[g] = (g + 1) * batch_size / gpus - g * batch_size / gpus;
  return out;
}

BatchPlan plan_batch(Policy& policy, const PolicyContext& ctx, int batch,
                     const std::vector<LayerRouting>& routing, const std::vector<Forecast>* forecasts) {
  const ModelSpec& m = ctx.model;
  const int G = ctx.cluster.num_gpus();
  const std::int64_t seq_len = ctx.workload.seq_len;
  if (static_cast<int>(routing.size()) != m.num_moe_layers())
    throw std::logic_error("plan_batch: one routing per MoE layer expected");
  if (forecasts && forecasts->size() != routing.size())
    throw std::logic_error("plan_batch: one forecast per MoE layer expected");
  const Forecast no_forecast;

  BatchPlan bp;
  const std::vector<std::int64_t> seqs = sequences_per_gpu(ctx.workload.batch_size, G);
  bp.home_tokens.resize(G);
  std::vector<int> token_home;
  token_home.reserve(ctx.workload.tokens_per_batch());
  for (int g = 0; g < G; ++g) {
    bp.home_tokens[g] = seqs[g] * seq_len;
    token_home.insert(token_home.end(), static_cast<std::size_t>(bp.home_tokens[g]), g);
  }

  TaskGraph& plan = bp.graph;
  // last[g]: the task after which GPU g's hidden states for the next layer are ready.
  std::vector<TaskId> last(G);
  for (int g = 0; g < G; ++g) last[g] = plan.join({}, Phase::kOther, -1);

  int moe_index = 0;
  for (int layer = 0; layer < m.layers; ++layer) {
    const bool moe = m.is_moe_layer(layer);
    const Forecast& forecast = moe && forecasts ? (*forecasts)[static_cast<std::size_t>(moe_index)] : no_forecast;
    if (forecast.overhead_ms > 0.0) {
      // The predictor runs on every GPU before the layer's attention.
      for (int g = 0; g < G; ++g) {
        const TaskId dep[] = {last[g]};
        last[g] = plan.delay(ms_to_ticks(forecast.overhead_ms), Phase::kPredict, layer, dep, g);
      }
    }
    std::vector<TaskId> attn(G);
    for (int g = 0; g < G; ++g) {
      const TaskId dep[] = {last[g]};
      attn[g] = seqs[g] > 0 ? plan.compute(g, Phase::kAttention, layer, attention_ops(m, seqs[g], seq_len), dep)
                            : plan.join(dep, Phase::kAttention, layer);
    }
    if (!moe) {
      for (int g = 0; g < G; ++g) {
        const TaskId dep[] = {attn[g]};
        last[g] = seqs[g] > 0 ? plan.compute(g, Phase::kDense, layer, dense_ffn_ops(m, bp.home_tokens[g]), dep)
                              : plan.join(dep, Phase::kDense, layer);
      }
      continue;
    }
    MoeLayerInput in;
    in.layer = layer;
    in.moe_index = moe_index;
    in.batch = batch;
    in.routing = &routing[moe_index];
    in.forecast = &forecast;
    in.token_home = &token_home;
    in.home_tokens = bp.home_tokens;
    in.layer_start = last;
    in.ready.resize(G);
    for (int g = 0; g < G; ++g) {
      const TaskId dep[] = {attn[g]};
      in.ready[g] = seqs[g] > 0 ? plan.compute(g, Phase::kRouter, layer, router_ops(m, bp.home_tokens[g]), dep)
                                : plan.join(dep, Phase::kRouter, layer);
    }
    MoeLayerOutput out = policy.build_moe_layer(plan, ctx, in);
    if (static_cast<int>(out.done.size()) != G)
      throw std::logic_error("policy returned the wrong number of per-GPU outputs");
    last = out.done;
    bp.moe.push_back(std::move(out));
    ++moe_index;
  }
  return bp;
}

}  // namespace moesim
