#include "app/run/layer_queue_deployment.hpp"

#include <algorithm>
#include <cmath>

#include "core/diagnostics.hpp"
#include "models/operators.hpp"
#include "policies/memory.hpp"

namespace moesim {

LayerQueueDeployment layer_queue_deployment(const Scenario& s, const PluginEntry& entry) {
  const ModelSpec& m = s.model;
  const int G = s.hardware.num_gpus();
  auto fail = [&](const std::string& why) { throw InputError(entry.where, "policy '" + entry.label + "': " + why); };
  LayerQueueDeployment d;
  AmoeConfig& c = d.config;
  // The split: the deployment's (deployment.attention_gpus), or the policy's option (0 = half).
  const std::int64_t a =
      s.deployment.attention_expert_split() ? s.deployment.attention_gpus : entry.params.get_int("attention_gpus");
  c.attention_gpus = a == 0 ? G / 2 : static_cast<int>(std::min<std::int64_t>(a, G));
  if (a >= G || c.attention_gpus < 1)
    fail("attention_gpus " + std::to_string(a) + " leaves no expert GPU: the cluster has " + std::to_string(G) +
         " GPUs, and AMoE puts attention and experts on different GPUs (§3.3)");
  parse_layer_schedule(entry.params.get_string("scheduler"), c.schedule);
  c.defrag.lookahead_blocks = static_cast<int>(entry.params.get_int("lookahead_blocks"));
  c.defrag.decay = entry.params.get_float("decay");
  c.max_batch_tokens = entry.params.get_int("max_batch_tokens");
  c.schedule_us = entry.params.get_float("schedule_us");
  c.micro_batches = static_cast<int>(entry.params.get_int("micro_batches"));
  c.place_by_requests = entry.params.get_string("attention_placement") == "fewest-requests";

  // Memory. An expert GPU holds its experts of every block; an attention GPU every block's
  // attention (and dense FFNs, embeddings), its KV cache and a full batch's activations.
  const double usable = s.serving.gpu_memory_utilization * s.hardware.gpu.memory_bytes;
  const int X = G - c.attention_gpus;
  const int per_gpu = (m.experts + X - 1) / X;
  const double experts = static_cast<double>(per_gpu) * m.num_moe_layers() * m.expert_bytes();
  if (experts > usable)
    fail("an expert GPU holds " + std::to_string(per_gpu) + " experts of every block (" + gigabytes(experts) +
         "), more than the " + gigabytes(usable) + " the engine may use (gpu_memory_utilization x memory)");
  // The layer queues admit requests by KV blocks alone: a linear-attention layer's per-sequence
  // state has no place in them, so such a model is refused rather than priced without it.
  if (m.linear_attention.present())
    fail("the layer-queue mode does not hold linear-attention state (" + m.name +
         " has Gated DeltaNet layers); run the model in the stepped engine");
  const double weights = m.non_expert_params() * dtype_bytes(m.dtype);
  // The activations of a full attention execution, as the synchronous engine sizes a step's
  // (serving/memory.hpp).
  const double activations =
      dtype_bytes(m.dtype) * static_cast<double>(c.max_batch_tokens) * attention_activation_elements(m);
  const double block_bytes = static_cast<double>(s.serving.kv_block_tokens) * kv_cache_bytes_per_token(m);
  const auto blocks = static_cast<std::int64_t>(std::max(0.0, std::floor((usable - weights - activations) / block_bytes)));
  const std::int64_t longest = s.serving_workload.prompt.largest() + s.serving_workload.output.largest();
  const std::int64_t need = (longest + s.serving.kv_block_tokens - 1) / s.serving.kv_block_tokens;
  if (blocks < need)
    fail("an attention GPU's KV cache has room for " + std::to_string(blocks) + " blocks after " + gigabytes(weights) +
         " of weights, but the longest request needs " + std::to_string(need));
  d.kv_blocks.assign(static_cast<std::size_t>(c.attention_gpus), blocks);
  return d;
}

}  // namespace moesim
