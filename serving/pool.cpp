#include "serving/pool.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "models/operators.hpp"
#include "policies/memory.hpp"

namespace moesim {

const char* pool_role_name(PoolRole r) {
  switch (r) {
    case PoolRole::kColocated: return "colocated";
    case PoolRole::kPrefill: return "prefill";
    case PoolRole::kDecode: return "decode";
  }
  return "?";
}

int ServingPool::global_endpoint(int ep, const Cluster& cluster) const {
  if (ep < gpus) return cluster.gpu_endpoint(first_gpu + ep);
  const int first_node = cluster.node_of_gpu(first_gpu);
  return cluster.host_endpoint(first_node + (ep - gpus));
}

ClusterSpec pool_spec(const ClusterSpec& cluster, int first_gpu, int gpus) {
  ClusterSpec spec = cluster;
  if (gpus <= 0 || first_gpu < 0 || first_gpu + gpus > cluster.num_gpus())
    throw std::invalid_argument("a pool must be a non-empty range of the cluster's GPUs");
  const bool one_node = gpus <= cluster.gpus_per_node &&
                        first_gpu / cluster.gpus_per_node == (first_gpu + gpus - 1) / cluster.gpus_per_node;
  if (cluster.nodes == 1 || (one_node && gpus < cluster.gpus_per_node)) {
    spec.nodes = 1;
    spec.gpus_per_node = gpus;
    // A part of one node keeps the node's wiring: PCIe switches keep their GPU count where it
    // divides the pool, else each GPU has its own.
    if (spec.gpus_per_pcie_switch > 0 && gpus % spec.gpus_per_pcie_switch != 0) spec.gpus_per_pcie_switch = 1;
    spec.nics_per_node = std::min(spec.nics_per_node, gpus);
    return spec;
  }
  if (first_gpu % cluster.gpus_per_node != 0 || gpus % cluster.gpus_per_node != 0)
    throw std::invalid_argument("on a multi-node cluster a pool must be whole nodes or part of one node");
  spec.nodes = gpus / cluster.gpus_per_node;
  return spec;
}

std::vector<std::int64_t> kv_cache_blocks(const ServingPool& pool, const SchedulerConfig& config) {
  const int G = pool.gpus;
  const int tp = pool.tensor_parallel;
  const ModelSpec& m = pool.ctx->model;
  // A full step's new tokens per GPU: a rank's token budget, split over its group for the MoE
  // layer (every GPU of the group holds them all in attention).
  const std::vector<std::int64_t> home(static_cast<std::size_t>(G), config.max_batched_tokens);
  const MemoryEstimate e = estimate_memory(m, *pool.view, *pool.policy, *pool.ctx, home, balanced_selections(m, home), tp);
  const double memory = pool.view->spec().gpu.memory_bytes;
  const double block_bytes = static_cast<double>(config.kv_block_tokens) * kv_cache_bytes_per_token_gpu(m, tp);
  std::vector<std::int64_t> blocks(static_cast<std::size_t>(pool.ranks()), std::numeric_limits<std::int64_t>::max());
  const double capacity = config.gpu_memory_utilization * memory;
  // Linear-attention models keep a fixed state per running sequence, set aside before the KV
  // cache is sized: one per admissible sequence (max_num_seqs), as TensorRT-LLM's
  // MambaCacheManager holds max_batch_size states. SGLang sizes its mamba pool by
  // --max-mamba-cache-size or a ratio to the KV memory (mamba_full_memory_ratio, 0.9) and caps
  // running requests by it; where the KV cache does not bind either way, both admit alike.
  const double states = static_cast<double>(config.max_num_seqs) * linear_state_bytes_per_sequence_gpu(m, tp);
  for (int g = 0; g < G; ++g) {
    const double w = e.weights[static_cast<std::size_t>(g)], a = e.activations[static_cast<std::size_t>(g)] + states;
    const double free = config.kv_cache_free_memory_fraction ? *config.kv_cache_free_memory_fraction * (memory - w - a)
                                                             : capacity - w - a;
    const double b = free / block_bytes;
    const std::int64_t n = b > 0 ? static_cast<std::int64_t>(std::floor(std::min(b, 1e15))) : 0;
    auto& rank = blocks[static_cast<std::size_t>(g / tp)];
    rank = std::min(rank, n);
  }
  return blocks;
}

}  // namespace moesim
