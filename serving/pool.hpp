#pragma once
// A pool of GPUs that serves as one instance of the model: attention groups of `tensor_parallel`
// GPUs, each a rank with its own requests and KV cache (data-parallel attention when groups are
// single GPUs), experts placed by the pool's policy over the pool (expert parallel) or
// tensor-parallel inside each group. Colocated serving has one pool per instance; prefill/decode
// disaggregation has prefill pools and decode pools. A pool's policy sees the pool as a cluster of its own (GPUs 0..n-1 of the same
// kind and wiring); its plans are mapped onto the real GPUs before they run.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hardware/cluster.hpp"
#include "models/workload.hpp"
#include "policies/policy.hpp"
#include "predictors/predictor.hpp"
#include "serving/config.hpp"

namespace moesim {

enum class PoolRole { kColocated, kPrefill, kDecode };
const char* pool_role_name(PoolRole r);

/// One expert-parallel group and what decides for it.
struct ServingPool {
  PoolRole role = PoolRole::kColocated;
  int first_gpu = 0;  ///< its GPUs are [first_gpu, first_gpu + gpus) of the cluster
  int gpus = 0;
  int tensor_parallel = 1;       ///< GPUs per attention group (rank)
  bool expert_parallel = true;   ///< false: experts tensor-parallel inside each group
  int moe_expert_parallel = 1;   ///< with expert_parallel false: experts split over this many GPUs of a group
  int instance = 0;              ///< which copy of the model (metrics)
  int ranks() const { return gpus / tensor_parallel; }
  std::unique_ptr<Cluster> view;          ///< the pool as a cluster of its own (policy's view)
  std::unique_ptr<PrefillWorkload> shape; ///< representative step shape for profiling windows
  std::unique_ptr<PolicyContext> ctx;
  std::unique_ptr<Policy> policy;
  std::unique_ptr<Predictor> predictor;
  std::vector<std::int64_t> kv_blocks;    ///< per rank (attention group) of the pool

  /// Endpoint of the real cluster for endpoint `ep` of the pool's view (GPUs, then hosts).
  int global_endpoint(int ep, const Cluster& cluster) const;
};

/// The ClusterSpec of a pool of `gpus` GPUs starting at `first_gpu`: whole nodes of the cluster,
/// or part of one node. Throws std::invalid_argument otherwise (the scenario validator reports
/// that as an input error first).
ClusterSpec pool_spec(const ClusterSpec& cluster, int first_gpu, int gpus);

/// KV blocks each rank of a pool can hold: on each GPU, gpu_memory_utilization × memory less
/// the weights (non-expert weights 1/TP of them in an attention group; the policy's experts) and
/// the activations of a full step (max_batched_tokens per rank) — or, with
/// kv_cache_free_memory_fraction (TensorRT-LLM), that fraction of the memory left after them —
/// in blocks of `block_tokens` tokens of the GPU's KV bytes per token (KV heads split by TP,
/// MLA's latent replicated); a rank holds as many as its fullest GPU; never negative.
std::vector<std::int64_t> kv_cache_blocks(const ServingPool& pool, const SchedulerConfig& config);

}  // namespace moesim
