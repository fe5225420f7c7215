#include "serving/step_planner.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/invariants.hpp"
#include "hardware/collectives.hpp"
#include "hardware/host_cost.hpp"
#include "hardware/phase.hpp"

namespace moesim {

std::vector<std::int64_t> StepShape::home_tokens() const {
  std::vector<std::int64_t> out(seqs.size(), 0);
  for (std::size_t g = 0; g < seqs.size(); ++g)
    for (const SeqChunk& c : seqs[g]) out[g] += c.new_tokens;
  if (!grouped() || tp_experts) return out;
  // Expert parallel behind tensor-parallel attention: after the all-reduce every GPU of a group
  // holds the group's tokens, and each takes an even, contiguous share into the MoE layer.
  const auto T = static_cast<std::size_t>(attention_tp);
  for (std::size_t first = 0; first + T <= out.size(); first += T) {
    std::int64_t n = 0;
    for (std::size_t i = 0; i < T; ++i) n += out[first + i];
    const auto t = static_cast<std::int64_t>(T);
    for (std::size_t i = 0; i < T; ++i) {
      const auto k = static_cast<std::int64_t>(i);
      out[first + i] = (k + 1) * n / t - k * n / t;
    }
  }
  return out;
}

bool LayerSample::planned(int moe, int moe_layers) const {
  if (every <= 1) return true;
  const int block = moe / every;
  const int size = std::min(every, moe_layers - block * every);
  return moe - block * every == offset % size;
}

int LayerSample::weight(int moe, int moe_layers) const {
  if (every <= 1) return 1;
  const int block = moe / every;
  return std::min(every, moe_layers - block * every);
}

int LayerSample::next_planned(int moe, int moe_layers) const {
  if (moe >= moe_layers) return moe_layers;
  if (every <= 1) return moe;
  for (int block = moe / every; block * every < moe_layers; ++block) {
    const int size = std::min(every, moe_layers - block * every);
    const int at = block * every + offset % size;
    if (at >= moe) return at;
  }
  return moe_layers;
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
  if (out > 0.0) deps.push_back(plan.transfer(gpu, host, out, phase::kFetch, -1, dep, g, CopyEngine::kDeviceToHost));
  if (in > 0.0) deps.push_back(plan.transfer(host, gpu, in, phase::kFetch, -1, dep, g, CopyEngine::kHostToDevice));
  return plan.join(deps, phase::kFetch, -1);
}

// Every GPU's attention ops under tensor parallelism (Megatron-LM's split, as MoE-GPS §2 assumes):
// 1/G of the query heads and of the KV heads (one replicated KV head per GPU when there are fewer
// KV heads than GPUs) over every sequence of the step; norms and residuals on every token.
// `global`: the full-attention form; otherwise the model's local form (window or linear attention).
std::vector<Op> tensor_parallel_attention_ops(const ModelSpec& m, const StepShape& shape, int gpus, bool global) {
  if (m.attention.heads % gpus != 0)
    throw std::logic_error("tensor-parallel attention: " + std::to_string(m.attention.heads) +
                           " heads do not split over " + std::to_string(gpus) + " GPUs");
  ModelSpec slice = m;
  slice.attention.heads = m.attention.heads / gpus;
  slice.attention.kv_heads = std::max(1, m.attention.kv_heads / gpus);
  slice.linear_attention = tensor_parallel_slice(m, gpus).linear_attention;
  std::vector<SeqChunk> all;
  for (const auto& chunks : shape.seqs) all.insert(all.end(), chunks.begin(), chunks.end());
  return global ? attention_step_ops(slice, all, 0, shape.mla_absorbed_max_new)
                : local_attention_step_ops(slice, all, shape.mla_absorbed_max_new);
}

// selections-conserved (core/invariants.hpp): the routing holds its tokens × top-k selections,
// and the policy computes every one it does not report dropped, each on as many GPUs as its
// experts are sharded over (one under expert parallelism, the shard group when experts are
// split): the per-GPU computed selections sum to a whole multiple, 1 to G, of those kept.
void check_selections_conserved(const LayerRouting& r, const MoeLayerOutput& out, int layer) {
  const std::int64_t routed = r.by_count ? std::accumulate(r.counts.begin(), r.counts.end(), std::int64_t{0})
                                         : static_cast<std::int64_t>(r.experts.size());
  const std::int64_t kept = routed - out.tokens_dropped;
  const std::int64_t computed = std::accumulate(out.gpu_tokens.begin(), out.gpu_tokens.end(), std::int64_t{0});
  const auto gpus = static_cast<std::int64_t>(out.gpu_tokens.size());
  const bool whole_multiple = kept == 0 ? computed == 0 : computed % kept == 0 && computed / kept >= 1 && computed / kept <= gpus;
  check_invariant(routed == r.num_tokens * r.top_k && kept >= 0 && whole_multiple, Invariant::kSelectionsConserved, [&] {
    return "layer " + std::to_string(layer) + ": " + std::to_string(r.num_tokens) + " tokens x top-" +
           std::to_string(r.top_k) + ", " + std::to_string(routed) + " selections routed, " +
           std::to_string(out.tokens_dropped) + " dropped, " + std::to_string(computed) + " computed over " +
           std::to_string(gpus) + " GPUs";
  });
}

}  // namespace

StepBuilder::StepBuilder(Policy& policy, const PolicyContext& ctx, int step, const StepShape& shape, TaskGraph& plan)
    : policy_(policy),
      ctx_(ctx),
      step_(step),
      home_tokens_(shape.home_tokens()),
      tensor_parallel_(shape.tensor_parallel_attention),
      group_tp_(shape.attention_tp),
      grouped_(shape.grouped()),
      tp_experts_(shape.tp_experts),
      moe_ep_(std::max(1, shape.moe_expert_parallel)) {
  const int G = ctx.cluster.num_gpus();
  if (static_cast<int>(shape.seqs.size()) != G) throw std::logic_error("plan_step: one sequence list per GPU expected");
  if (grouped_ && (tensor_parallel_ || group_tp_ < 1 || G % group_tp_ != 0))
    throw std::logic_error("plan_step: attention groups must tile the GPUs");
  if (tensor_parallel_) {
    // After the all-reduce every GPU holds every token; each takes an even, contiguous share of
    // them into the MoE layer (MoE-GPS §2: "token placement is completely random after scatter",
    // and routing draws are independent of token order).
    const std::int64_t T = std::accumulate(home_tokens_.begin(), home_tokens_.end(), std::int64_t{0});
    for (int g = 0; g < G; ++g) home_tokens_[g] = (g + 1) * T / G - g * T / G;
  }
  last_.resize(G);
  for (int g = 0; g < G; ++g) {
    TaskId root = plan.join({}, phase::kOther, -1);
    if (!shape.host.empty()) {
      // The engine's host work (scheduling, input preparation, sampling), shown on every GPU it
      // holds up; overlapped, it runs beside the step, which ends when both have.
      const TaskId dep[] = {root};
      const TaskId host = plan.host(g, phase::kSchedule, -1, shape.host.front(), dep);
      if (!shape.host_overlap) root = host;
    }
    for (const Op& work : shape.serial_host) {
      // Kernels shorter than their issue leave the GPU waiting on the host: in that regime (an
      // eager step's norms, projections of a few tokens, routing) the issue adds to the step.
      const TaskId dep[] = {root};
      root = plan.host(g, phase::kSchedule, -1, work, dep);
    }
    last_[g] = add_swaps(plan, ctx, shape, g, root);
  }
  // Attention ops depend only on the GPU's chunks, the same in every layer: built once (twice for
  // models that interleave windowed or linear layers with global ones).
  const std::int64_t absorbed = shape.mla_absorbed_max_new;
  const bool two = ctx.model.interleaves_attention();
  attention_.resize(G);
  if (two) global_attention_.resize(G);
  if (grouped_) {
    slice_ = tensor_parallel_slice(ctx.model, group_tp_);
    for (int k = 0; k * group_tp_ < G; ++k) {
      std::vector<SeqChunk> chunks;
      for (int i = 0; i < group_tp_; ++i) {
        const auto& c = shape.seqs[static_cast<std::size_t>(k * group_tp_ + i)];
        chunks.insert(chunks.end(), c.begin(), c.end());
      }
      std::int64_t n = 0;
      for (const SeqChunk& c : chunks) n += c.new_tokens;
      group_tokens_.push_back(n);
      const std::vector<Op> ops = local_attention_step_ops(slice_, chunks, absorbed);
      for (int i = 0; i < group_tp_; ++i) attention_[static_cast<std::size_t>(k * group_tp_ + i)] = ops;
      if (two) {
        const std::vector<Op> global = attention_step_ops(slice_, chunks, 0, absorbed);
        for (int i = 0; i < group_tp_; ++i) global_attention_[static_cast<std::size_t>(k * group_tp_ + i)] = global;
      }
    }
    return;
  }
  if (tensor_parallel_) {
    attention_.assign(static_cast<std::size_t>(G), tensor_parallel_attention_ops(ctx.model, shape, G, false));
    if (two) global_attention_.assign(static_cast<std::size_t>(G), tensor_parallel_attention_ops(ctx.model, shape, G, true));
    return;
  }
  for (int g = 0; g < G; ++g) {
    attention_[g] = local_attention_step_ops(ctx.model, shape.seqs[g], absorbed);
    if (two) global_attention_[g] = attention_step_ops(ctx.model, shape.seqs[g], 0, absorbed);
  }
}

const std::vector<Op>& StepBuilder::attention_of(int g, int layer) const {
  const auto i = static_cast<std::size_t>(g);
  const ModelSpec& m = ctx_.model;
  const bool global = m.linear_attention.present() ? !m.is_linear_attention_layer(layer) : m.window_of_layer(layer) == 0;
  return !global_attention_.empty() && global ? global_attention_[i] : attention_[i];
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
    // The predictor runs on every GPU before the layer's attention: host work over the layer's
    // tokens, of the reference time the predictor forecast (MoE-GPS §3.2.2's overhead curve).
    const Op work = host_work("predictor", routing ? routing->num_tokens : 0, f.overhead_ms * 1e-3);
    for (int g = 0; g < G; ++g) {
      const TaskId dep[] = {last_[g]};
      last_[g] = plan.host(g, phase::kPredict, layer, work, dep);
    }
  }
  if (grouped_) return add_grouped_layer(plan, layer, moe, routing, f);
  std::vector<TaskId> attn = tensor_parallel_ ? add_tensor_parallel_attention(plan, layer) : std::vector<TaskId>(G);
  for (int g = 0; g < G && !tensor_parallel_; ++g) {
    const TaskId dep[] = {last_[g]};
    attn[g] = home_tokens_[g] > 0 ? plan.compute(g, phase::kAttention, layer, attention_of(g, layer), dep)
                                  : plan.join(dep, phase::kAttention, layer);
  }
  if (!moe) {
    for (int g = 0; g < G; ++g) {
      const TaskId dep[] = {attn[g]};
      last_[g] = home_tokens_[g] > 0 ? plan.compute(g, phase::kDense, layer, dense_ffn_ops(m, home_tokens_[g]), dep)
                                     : plan.join(dep, phase::kDense, layer);
    }
    return nullptr;
  }
  MoeLayerInput in = moe_input(layer, routing, f);
  in.ready.resize(G);
  for (int g = 0; g < G; ++g) {
    const TaskId dep[] = {attn[g]};
    in.ready[g] = home_tokens_[g] > 0 ? plan.compute(g, phase::kRouter, layer, router_ops(m, home_tokens_[g]), dep)
                                      : plan.join(dep, phase::kRouter, layer);
  }
  moe_out_ = policy_.build_moe_layer(plan, ctx_, in);
  if (static_cast<int>(moe_out_.done.size()) != G)
    throw std::logic_error("policy returned the wrong number of per-GPU outputs");
  check_selections_conserved(*in.routing, moe_out_, layer);
  last_ = moe_out_.done;
  return &moe_out_;
}

void StepBuilder::skip_layer() {
  if (!next_is_moe()) throw std::logic_error("StepBuilder: only MoE layers are left out");
  ++layer_;
  ++moe_index_;
  // A planned MoE layer leaves its group's tokens split over the group's GPUs (expert parallel
  // behind tensor-parallel attention): the next layer gathers them first.
  if (grouped_ && !tp_experts_) split_ = group_tp_ > 1;
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
                                                phase::kCollective, layer, last_);
    start.assign(static_cast<std::size_t>(G), gathered);
  }
  std::vector<TaskId> attn(static_cast<std::size_t>(G));
  for (int g = 0; g < G; ++g) {
    const TaskId dep[] = {start[g]};
    attn[g] = plan.compute(g, phase::kAttention, layer, attention_of(g, layer), dep);
  }
  // Each GPU's output projection holds a partial sum over its heads for every token (MoE-GPS §2:
  // "We used Ring All Reduce to optimize the communication runtime after TP").
  const std::int64_t T = std::accumulate(home_tokens_.begin(), home_tokens_.end(), std::int64_t{0});
  const TaskId reduced = add_ring_all_reduce(plan, ctx_.cluster, gpus, static_cast<double>(T) * token_bytes,
                                             phase::kCollective, layer, attn);
  return std::vector<TaskId>(static_cast<std::size_t>(G), reduced);
}

MoeLayerInput StepBuilder::moe_input(int layer, const LayerRouting* routing, const Forecast& forecast) {
  MoeLayerInput in;
  in.layer = layer;
  in.moe_index = moe_index_++;
  in.batch = step_;
  in.routing = routing;
  in.forecast = &forecast;
  in.token_home = &token_home_of(*routing);
  in.home_tokens = home_tokens_;
  in.layer_start = last_;
  return in;
}

const std::vector<int>& StepBuilder::token_home_of(const LayerRouting& r) {
  // A count-level routing says where its selections come from itself; only a token-level one
  // needs the GPU of each token (a prefill step's thousands, every step).
  if (!r.by_count && token_home_.empty()) {
    const auto G = home_tokens_.size();
    for (std::size_t g = 0; g < G; ++g)
      token_home_.insert(token_home_.end(), static_cast<std::size_t>(home_tokens_[g]), static_cast<int>(g));
  }
  return token_home_;
}

std::vector<int> StepBuilder::group_gpus(int k) const {
  std::vector<int> gpus(static_cast<std::size_t>(group_tp_));
  std::iota(gpus.begin(), gpus.end(), k * group_tp_);
  return gpus;
}

// One layer of a deployment with attention groups of T GPUs (vLLM, SGLang and TensorRT-LLM's
// tensor parallelism, Megatron-LM's split): every GPU of a group runs 1/T of the heads over the
// group's tokens, and a ring all-reduce sums the attention output. A dense FFN (and a MoE block
// with tensor-parallel experts) is split 1/T over the same group, every GPU computing on every
// token of the group, and a second all-reduce sums it. With expert parallelism the policy takes
// each GPU's even share of its group's tokens over the whole pool; the shares come back to
// their GPUs, and the next layer's heads first all-gather the group's tokens.
const MoeLayerOutput* StepBuilder::add_grouped_layer(TaskGraph& plan, int layer, bool moe, const LayerRouting* routing,
                                                     const Forecast& f) {
  const ModelSpec& m = ctx_.model;
  const Cluster& cluster = ctx_.cluster;
  const int G = cluster.num_gpus();
  const int T = group_tp_;
  const int groups = G / T;
  const double tb = token_bytes(m);
  // Sums a group's partial results: a ring all-reduce of its tokens' hidden states (a no-op on
  // one GPU); every GPU of the group continues from it.
  const auto all_reduce = [&](int k, std::span<const TaskId> deps, Phase phase) {
    const std::vector<int> gpus = group_gpus(k);
    const TaskId done = T > 1 ? add_ring_all_reduce(plan, cluster, gpus, static_cast<double>(group_tokens_[k]) * tb,
                                                   phase, layer, deps)
                              : deps[0];
    for (int i = 0; i < T; ++i) last_[static_cast<std::size_t>(k * T + i)] = done;
  };
  for (int k = 0; k < groups; ++k) {
    const auto first = static_cast<std::size_t>(k * T);
    if (group_tokens_[static_cast<std::size_t>(k)] == 0) continue;
    std::vector<TaskId> start(last_.begin() + static_cast<std::ptrdiff_t>(first),
                              last_.begin() + static_cast<std::ptrdiff_t>(first) + T);
    if (split_ && T > 1) {
      // NCCL's all-gather takes equal contributions: each share padded to the group's largest.
      const auto share = *std::max_element(home_tokens_.begin() + static_cast<std::ptrdiff_t>(first),
                                           home_tokens_.begin() + static_cast<std::ptrdiff_t>(first) + T);
      const TaskId gathered = add_ring_all_gather(plan, cluster, group_gpus(k), static_cast<double>(share) * tb,
                                                  phase::kCollective, layer, start);
      start.assign(static_cast<std::size_t>(T), gathered);
    }
    std::vector<TaskId> attn(static_cast<std::size_t>(T));
    for (int i = 0; i < T; ++i) {
      const TaskId dep[] = {start[static_cast<std::size_t>(i)]};
      attn[static_cast<std::size_t>(i)] =
          plan.compute(k * T + i, phase::kAttention, layer, attention_of(k * T + i, layer), dep);
    }
    all_reduce(k, attn, phase::kCollective);
  }
  split_ = false;
  if (!moe) {
    for (int k = 0; k < groups; ++k) {
      const std::int64_t n = group_tokens_[static_cast<std::size_t>(k)];
      if (n == 0) continue;
      std::vector<TaskId> ffn(static_cast<std::size_t>(T));
      for (int i = 0; i < T; ++i) {
        const TaskId dep[] = {last_[static_cast<std::size_t>(k * T + i)]};
        ffn[static_cast<std::size_t>(i)] = plan.compute(k * T + i, phase::kDense, layer, dense_ffn_ops(slice_, n), dep);
      }
      all_reduce(k, ffn, phase::kCollective);
    }
    return nullptr;
  }
  if (tp_experts_) {
    ++moe_index_;
    // Selections per expert of each group (its tokens are routed from its first GPU).
    std::vector<std::vector<std::int64_t>> per_expert(static_cast<std::size_t>(groups),
                                                      std::vector<std::int64_t>(static_cast<std::size_t>(m.experts), 0));
    for_each_selection(*routing, token_home_of(*routing), [&](int src, int e, std::int64_t n) {
      per_expert[static_cast<std::size_t>(src / T)][static_cast<std::size_t>(e)] += n;
    });
    moe_out_ = MoeLayerOutput{};
    moe_out_.gpu_tokens.assign(static_cast<std::size_t>(G), 0);
    // Mixed MoE parallelism (TensorRT-LLM moe_ep_size x moe_tp_size): GPU i of a group holds the
    // experts of its EP slice (a contiguous range of E / EP), each sharded over T / EP GPUs.
    const int ep = moe_ep_, shards = T / moe_ep_;
    const int per_slice = m.experts / ep;
    for (int k = 0; k < groups; ++k) {
      const std::int64_t n = group_tokens_[static_cast<std::size_t>(k)];
      if (n == 0) continue;
      std::vector<TaskId> block(static_cast<std::size_t>(T));
      for (int i = 0; i < T; ++i) {
        const int g = k * T + i;
        std::vector<Op> ops = router_ops(m, n);
        const auto& counts = per_expert[static_cast<std::size_t>(k)];
        const auto slice_begin = counts.begin() + static_cast<std::ptrdiff_t>((i / shards) * per_slice);
        const std::vector<std::int64_t> mine = ep > 1 ? std::vector<std::int64_t>(slice_begin, slice_begin + per_slice) : counts;
        for (Op& op : sharded_expert_ops(m, mine, shards, true)) ops.push_back(std::move(op));
        for (Op& op : shared_expert_ops(slice_, n)) ops.push_back(std::move(op));
        for (Op& op : combine_ops(m, n)) ops.push_back(std::move(op));
        const TaskId dep[] = {last_[static_cast<std::size_t>(g)]};
        block[static_cast<std::size_t>(i)] = plan.compute(g, phase::kExperts, layer, ops, dep);
        std::int64_t selections = 0;
        for (const auto c : mine) selections += c;
        moe_out_.gpu_tokens[static_cast<std::size_t>(g)] = selections;
      }
      all_reduce(k, block, phase::kCombine);
    }
    moe_out_.done = last_;
    return &moe_out_;
  }
  MoeLayerInput in = moe_input(layer, routing, f);
  in.ready.resize(static_cast<std::size_t>(G));
  for (int g = 0; g < G; ++g) {
    const TaskId dep[] = {last_[static_cast<std::size_t>(g)]};
    const std::int64_t n = home_tokens_[static_cast<std::size_t>(g)];
    in.ready[static_cast<std::size_t>(g)] =
        n > 0 ? plan.compute(g, phase::kRouter, layer, router_ops(m, n), dep) : plan.join(dep, phase::kRouter, layer);
  }
  moe_out_ = policy_.build_moe_layer(plan, ctx_, in);
  if (static_cast<int>(moe_out_.done.size()) != G)
    throw std::logic_error("policy returned the wrong number of per-GPU outputs");
  check_selections_conserved(*in.routing, moe_out_, layer);
  last_ = moe_out_.done;
  split_ = T > 1;
  return &moe_out_;
}

StepPlan plan_step(Policy& policy, const PolicyContext& ctx, int step, const StepShape& shape,
                   const std::vector<LayerRouting>& routing, const std::vector<Forecast>* forecasts) {
  StepPlan sp;
  plan_step_into(sp, policy, ctx, step, shape, routing, forecasts);
  return sp;
}

void clear_plan(StepPlan& sp) {
  sp.graph.clear();
  sp.moe.clear();
  sp.home_tokens.clear();
}

void plan_step_into(StepPlan& sp, Policy& policy, const PolicyContext& ctx, int step, const StepShape& shape,
                    const std::vector<LayerRouting>& routing, const std::vector<Forecast>* forecasts) {
  const ModelSpec& m = ctx.model;
  const int moe_layers = m.num_moe_layers();
  if (static_cast<int>(routing.size()) != moe_layers)
    throw std::logic_error("plan_step: one routing per MoE layer expected");
  if (forecasts && forecasts->size() != routing.size())
    throw std::logic_error("plan_step: one forecast per MoE layer expected");
  clear_plan(sp);
  StepBuilder builder(policy, ctx, step, shape, sp.graph);
  sp.home_tokens = builder.home_tokens();
  int next_planned = shape.sample.next_planned(0, moe_layers);
  while (!builder.done()) {
    if (!builder.next_is_moe()) {
      builder.add_layer(sp.graph, nullptr, nullptr);
      continue;
    }
    const int moe = builder.next_moe_index();
    if (moe != next_planned) {
      builder.skip_layer();
      continue;
    }
    next_planned = shape.sample.next_planned(moe + 1, moe_layers);
    const auto i = static_cast<std::size_t>(moe);
    const auto first = static_cast<TaskId>(sp.graph.size());
    builder.add_layer(sp.graph, &routing[i], forecasts ? &(*forecasts)[i] : nullptr);
    sp.moe.push_back(builder.take_moe_output());
    const int weight = shape.sample.weight(moe, moe_layers);
    if (weight > 1) {
      sp.graph.set_repeat(first, static_cast<TaskId>(sp.graph.size()), static_cast<std::uint16_t>(weight));
      sp.moe.back().repeat = weight;
    }
  }
  builder.add_drafts(sp.graph, shape);
}

}  // namespace moesim
