#include "serving/step_planner.hpp"

#include <stdexcept>

namespace moesim {

std::vector<std::int64_t> StepShape::home_tokens() const {
  std::vector<std::int64_t> out(seqs.size(), 0);
  for (std::size_t g = 0; g < seqs.size(); ++g)
    for (const SeqChunk& c : seqs[g]) out[g] += c.new_tokens;
  return out;
}

namespace {

// KV-cache swaps before the step: device→host and host→device copies on the GPU's copy engines
// over its PCIe path; the GPU's first layer waits for both (the blocks it computes into must be
// free, and a swapped-in sequence's cache must be back).
TaskId add_swaps(TaskGraph& plan, const PolicyContext& ctx, const StepShape& shape, int g, TaskId start) {
  const double out = shape.swap_out_bytes.empty() ? 0.0 : shape.swap_out_bytes[g];
  const double in = shape.swap_in_bytes.empty() ? 0.0 : shape.swap_in_bytes[g];
  if (out <= 0.0 && in <= 0.0) return start;
  const int host = ctx.cluster.host_endpoint(ctx.cluster.node_of_gpu(g));
  const int gpu = ctx.cluster.gpu_endpoint(g);
  std::vector<TaskId> deps;
  const TaskId dep[] = {start};
  if (out > 0.0) deps.push_back(plan.transfer(gpu, host, out, Phase::kFetch, -1, dep, g, CopyEngine::kDeviceToHost));
  if (in > 0.0) deps.push_back(plan.transfer(host, gpu, in, Phase::kFetch, -1, dep, g, CopyEngine::kHostToDevice));
  return plan.join(deps, Phase::kFetch, -1);
}

}  // namespace

StepPlan plan_step(Policy& policy, const PolicyContext& ctx, int step, const StepShape& shape,
                   const std::vector<LayerRouting>& routing, const std::vector<Forecast>* forecasts) {
  const ModelSpec& m = ctx.model;
  const int G = ctx.cluster.num_gpus();
  if (static_cast<int>(shape.seqs.size()) != G) throw std::logic_error("plan_step: one sequence list per GPU expected");
  if (static_cast<int>(routing.size()) != m.num_moe_layers())
    throw std::logic_error("plan_step: one routing per MoE layer expected");
  if (forecasts && forecasts->size() != routing.size())
    throw std::logic_error("plan_step: one forecast per MoE layer expected");
  const Forecast no_forecast;

  StepPlan sp;
  sp.home_tokens = shape.home_tokens();
  std::vector<int> token_home;
  for (int g = 0; g < G; ++g) token_home.insert(token_home.end(), static_cast<std::size_t>(sp.home_tokens[g]), g);

  TaskGraph& plan = sp.graph;
  // last[g]: the task after which GPU g's hidden states for the next layer are ready.
  std::vector<TaskId> last(G);
  for (int g = 0; g < G; ++g) last[g] = add_swaps(plan, ctx, shape, g, plan.join({}, Phase::kOther, -1));

  // Attention ops depend only on the GPU's chunks, the same in every layer: built once.
  std::vector<std::vector<Op>> attention(G);
  for (int g = 0; g < G; ++g) attention[g] = attention_step_ops(m, shape.seqs[g]);

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
      attn[g] = sp.home_tokens[g] > 0 ? plan.compute(g, Phase::kAttention, layer, attention[g], dep)
                                      : plan.join(dep, Phase::kAttention, layer);
    }
    if (!moe) {
      for (int g = 0; g < G; ++g) {
        const TaskId dep[] = {attn[g]};
        last[g] = sp.home_tokens[g] > 0 ? plan.compute(g, Phase::kDense, layer, dense_ffn_ops(m, sp.home_tokens[g]), dep)
                                        : plan.join(dep, Phase::kDense, layer);
      }
      continue;
    }
    MoeLayerInput in;
    in.layer = layer;
    in.moe_index = moe_index;
    in.batch = step;
    in.routing = &routing[moe_index];
    in.forecast = &forecast;
    in.token_home = &token_home;
    in.home_tokens = sp.home_tokens;
    in.layer_start = last;
    in.ready.resize(G);
    for (int g = 0; g < G; ++g) {
      const TaskId dep[] = {attn[g]};
      in.ready[g] = sp.home_tokens[g] > 0 ? plan.compute(g, Phase::kRouter, layer, router_ops(m, sp.home_tokens[g]), dep)
                                          : plan.join(dep, Phase::kRouter, layer);
    }
    MoeLayerOutput out = policy.build_moe_layer(plan, ctx, in);
    if (static_cast<int>(out.done.size()) != G)
      throw std::logic_error("policy returned the wrong number of per-GPU outputs");
    last = out.done;
    sp.moe.push_back(std::move(out));
    ++moe_index;
  }
  return sp;
}

}  // namespace moesim
