#include "serving/step_planner.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "hardware/collectives.hpp"

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

// Every GPU's attention ops under tensor parallelism (Megatron-LM's split, as MoE-GPS §2 assumes):
// 1/G of the query heads and of the KV heads (one replicated KV head per GPU when there are fewer
// KV heads than GPUs) over every sequence of the step; norms and residuals on every token.
std::vector<Op> tensor_parallel_attention_ops(const ModelSpec& m, const StepShape& shape, int gpus) {
  if (m.attention.heads % gpus != 0)
    throw std::logic_error("tensor-parallel attention: " + std::to_string(m.attention.heads) +
                           " heads do not split over " + std::to_string(gpus) + " GPUs");
  ModelSpec slice = m;
  slice.attention.heads = m.attention.heads / gpus;
  slice.attention.kv_heads = std::max(1, m.attention.kv_heads / gpus);
  std::vector<SeqChunk> all;
  for (const auto& chunks : shape.seqs) all.insert(all.end(), chunks.begin(), chunks.end());
  return attention_step_ops(slice, all);
}

}  // namespace

StepBuilder::StepBuilder(Policy& policy, const PolicyContext& ctx, int step, const StepShape& shape, TaskGraph& plan)
    : policy_(policy),
      ctx_(ctx),
      step_(step),
      home_tokens_(shape.home_tokens()),
      tensor_parallel_(shape.tensor_parallel_attention) {
  const int G = ctx.cluster.num_gpus();
  if (static_cast<int>(shape.seqs.size()) != G) throw std::logic_error("plan_step: one sequence list per GPU expected");
  if (tensor_parallel_) {
    // After the all-reduce every GPU holds every token; each takes an even, contiguous share of
    // them into the MoE layer (MoE-GPS §2: "token placement is completely random after scatter",
    // and routing draws are independent of token order).
    const std::int64_t T = std::accumulate(home_tokens_.begin(), home_tokens_.end(), std::int64_t{0});
    for (int g = 0; g < G; ++g) home_tokens_[g] = (g + 1) * T / G - g * T / G;
  }
  for (int g = 0; g < G; ++g) token_home_.insert(token_home_.end(), static_cast<std::size_t>(home_tokens_[g]), g);
  last_.resize(G);
  for (int g = 0; g < G; ++g) last_[g] = add_swaps(plan, ctx, shape, g, plan.join({}, Phase::kOther, -1));
  // Attention ops depend only on the GPU's chunks, the same in every layer: built once.
  attention_.resize(G);
  if (tensor_parallel_) {
    attention_.assign(static_cast<std::size_t>(G), tensor_parallel_attention_ops(ctx.model, shape, G));
    return;
  }
  for (int g = 0; g < G; ++g) attention_[g] = attention_step_ops(ctx.model, shape.seqs[g]);
}

bool StepBuilder::done() const { return layer_ >= ctx_.model.layers; }

bool StepBuilder::next_is_moe() const { return !done() && ctx_.model.is_moe_layer(layer_); }

const MoeLayerOutput* StepBuilder::add_layer(TaskGraph& plan, const LayerRouting* routing, const Forecast* forecast) {
  if (done()) throw std::logic_error("StepBuilder: every layer is planned");
  const ModelSpec& m = ctx_.model;
  const int G = ctx_.cluster.num_gpus();
  const int layer = layer_++;
  const bool moe = m.is_moe_layer(layer);
  if (moe && !routing) throw std::logic_error("StepBuilder: a MoE layer needs its routing");
  const Forecast no_forecast;
  const Forecast& f = moe && forecast ? *forecast : no_forecast;
  if (f.overhead_ms > 0.0) {
    // The predictor runs on every GPU before the layer's attention.
    for (int g = 0; g < G; ++g) {
      const TaskId dep[] = {last_[g]};
      last_[g] = plan.delay(ms_to_ticks(f.overhead_ms), Phase::kPredict, layer, dep, g);
    }
  }
  std::vector<TaskId> attn = tensor_parallel_ ? add_tensor_parallel_attention(plan, layer) : std::vector<TaskId>(G);
  for (int g = 0; g < G && !tensor_parallel_; ++g) {
    const TaskId dep[] = {last_[g]};
    attn[g] = home_tokens_[g] > 0 ? plan.compute(g, Phase::kAttention, layer, attention_[g], dep)
                                  : plan.join(dep, Phase::kAttention, layer);
  }
  if (!moe) {
    for (int g = 0; g < G; ++g) {
      const TaskId dep[] = {attn[g]};
      last_[g] = home_tokens_[g] > 0 ? plan.compute(g, Phase::kDense, layer, dense_ffn_ops(m, home_tokens_[g]), dep)
                                     : plan.join(dep, Phase::kDense, layer);
    }
    return nullptr;
  }
  MoeLayerInput in;
  in.layer = layer;
  in.moe_index = moe_index_++;
  in.batch = step_;
  in.routing = routing;
  in.forecast = &f;
  in.token_home = &token_home_;
  in.home_tokens = home_tokens_;
  in.layer_start = last_;
  in.ready.resize(G);
  for (int g = 0; g < G; ++g) {
    const TaskId dep[] = {attn[g]};
    in.ready[g] = home_tokens_[g] > 0 ? plan.compute(g, Phase::kRouter, layer, router_ops(m, home_tokens_[g]), dep)
                                      : plan.join(dep, Phase::kRouter, layer);
  }
  moe_out_ = policy_.build_moe_layer(plan, ctx_, in);
  if (static_cast<int>(moe_out_.done.size()) != G)
    throw std::logic_error("policy returned the wrong number of per-GPU outputs");
  last_ = moe_out_.done;
  return &moe_out_;
}

std::vector<TaskId> StepBuilder::add_tensor_parallel_attention(TaskGraph& plan, int layer) {
  const int G = ctx_.cluster.num_gpus();
  std::vector<int> gpus(static_cast<std::size_t>(G));
  std::iota(gpus.begin(), gpus.end(), 0);
  const double token_bytes = moesim::token_bytes(ctx_.model);
  std::vector<TaskId> start = last_;
  if (layer > 0) {
    // The previous layer left each GPU's share of the outputs on that GPU; the heads of this one
    // need every token: a ring all-gather (NCCL pads each share to the largest).
    const auto largest = *std::max_element(home_tokens_.begin(), home_tokens_.end());
    const TaskId gathered = add_ring_all_gather(plan, ctx_.cluster, gpus, static_cast<double>(largest) * token_bytes,
                                                Phase::kCollective, layer, last_);
    start.assign(static_cast<std::size_t>(G), gathered);
  }
  std::vector<TaskId> attn(static_cast<std::size_t>(G));
  for (int g = 0; g < G; ++g) {
    const TaskId dep[] = {start[g]};
    attn[g] = plan.compute(g, Phase::kAttention, layer, attention_[g], dep);
  }
  // Each GPU's output projection holds a partial sum over its heads for every token (MoE-GPS §2:
  // "We used Ring All Reduce to optimize the communication runtime after TP").
  const std::int64_t T = std::accumulate(home_tokens_.begin(), home_tokens_.end(), std::int64_t{0});
  const TaskId reduced = add_ring_all_reduce(plan, ctx_.cluster, gpus, static_cast<double>(T) * token_bytes,
                                             Phase::kCollective, layer, attn);
  return std::vector<TaskId>(static_cast<std::size_t>(G), reduced);
}

StepPlan plan_step(Policy& policy, const PolicyContext& ctx, int step, const StepShape& shape,
                   const std::vector<LayerRouting>& routing, const std::vector<Forecast>* forecasts) {
  const ModelSpec& m = ctx.model;
  if (static_cast<int>(routing.size()) != m.num_moe_layers())
    throw std::logic_error("plan_step: one routing per MoE layer expected");
  if (forecasts && forecasts->size() != routing.size())
    throw std::logic_error("plan_step: one forecast per MoE layer expected");
  StepPlan sp;
  StepBuilder builder(policy, ctx, step, shape, sp.graph);
  sp.home_tokens = builder.home_tokens();
  while (!builder.done()) {
    if (!builder.next_is_moe()) {
      builder.add_layer(sp.graph, nullptr, nullptr);
      continue;
    }
    const auto i = static_cast<std::size_t>(builder.next_moe_index());
    builder.add_layer(sp.graph, &routing[i], forecasts ? &(*forecasts)[i] : nullptr);
    sp.moe.push_back(builder.take_moe_output());
  }
  return sp;
}

}  // namespace moesim
