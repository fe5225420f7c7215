#include "serving/pool.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "serving/memory.hpp"

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
  if (cluster.nodes == 1) {
    spec.gpus_per_node = gpus;
    // A part of one node keeps the node's wiring: PCIe switches keep their GPU count where it
    // divides the pool, else each GPU has its own.
    if (spec.gpus_per_pcie_switch > 0 && gpus % spec.gpus_per_pcie_switch != 0) spec.gpus_per_pcie_switch = 1;
    spec.nics_per_node = std::min(spec.nics_per_node, gpus);
    return spec;
  }
  if (first_gpu % cluster.gpus_per_node != 0 || gpus % cluster.gpus_per_node != 0)
    throw std::invalid_argument("on a multi-node cluster a pool must be whole nodes");
  spec.nodes = gpus / cluster.gpus_per_node;
  return spec;
}

std::vector<std::int64_t> kv_cache_blocks(const ServingPool& pool, double memory_utilization,
                                          std::int64_t max_batched_tokens, std::int64_t block_tokens,
                                          double kv_bytes_per_token) {
  const int G = pool.gpus;
  const std::vector<std::int64_t> home(G, max_batched_tokens);
  const MemoryEstimate e =
      estimate_memory(pool.ctx->model, *pool.view, *pool.policy, *pool.ctx, home, balanced_selections(pool.ctx->model, home));
  const double capacity = memory_utilization * pool.view->spec().gpu.memory_bytes;
  std::vector<std::int64_t> blocks(G);
  for (int g = 0; g < G; ++g) {
    const double free = capacity - e.weights[g] - e.activations[g];
    const double b = free / (static_cast<double>(block_tokens) * kv_bytes_per_token);
    blocks[g] = b > 0 ? static_cast<std::int64_t>(std::floor(std::min(b, 1e15))) : 0;
  }
  return blocks;
}

}  // namespace moesim
