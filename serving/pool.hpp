#pragma once
// A pool of GPUs that serves as one expert-parallel group: attention data-parallel (each GPU a
// rank with its own requests and KV cache), experts placed by the pool's policy. Colocated
// serving has one pool of every GPU; prefill/decode disaggregation has a prefill pool and a
// decode pool. A pool's policy sees the pool as a cluster of its own (GPUs 0..n-1 of the same
// kind and wiring); its plans are mapped onto the real GPUs before they run.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hardware/cluster.hpp"
#include "models/workload.hpp"
#include "policies/policy.hpp"
#include "predictors/predictor.hpp"

namespace moesim {

enum class PoolRole { kColocated, kPrefill, kDecode };
const char* pool_role_name(PoolRole r);

/// One expert-parallel group and what decides for it.
struct ServingPool {
  PoolRole role = PoolRole::kColocated;
  int first_gpu = 0;  ///< its GPUs are [first_gpu, first_gpu + gpus) of the cluster
  int gpus = 0;
  std::unique_ptr<Cluster> view;          ///< the pool as a cluster of its own (policy's view)
  std::unique_ptr<PrefillWorkload> shape; ///< representative step shape for profiling windows
  std::unique_ptr<PolicyContext> ctx;
  std::unique_ptr<Policy> policy;
  std::unique_ptr<Predictor> predictor;
  std::vector<std::int64_t> kv_blocks;    ///< per GPU of the pool

  /// Endpoint of the real cluster for endpoint `ep` of the pool's view (GPUs, then hosts).
  int global_endpoint(int ep, const Cluster& cluster) const;
};

/// The ClusterSpec of a pool of `gpus` GPUs starting at `first_gpu`: whole nodes of the cluster,
/// or part of a single-node cluster. Throws std::invalid_argument otherwise (the scenario
/// validator reports that as an input error first).
ClusterSpec pool_spec(const ClusterSpec& cluster, int first_gpu, int gpus);

/// KV blocks each GPU of a pool can hold: gpu_memory_utilization × memory, less the policy's
/// weights and the activations of a full step (max_batched_tokens per GPU), in blocks of
/// `block_tokens` tokens of `kv_bytes_per_token` bytes; never negative.
std::vector<std::int64_t> kv_cache_blocks(const ServingPool& pool, double memory_utilization,
                                          std::int64_t max_batched_tokens, std::int64_t block_tokens,
                                          double kv_bytes_per_token);

}  // namespace moesim
