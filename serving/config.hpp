#pragma once
// The `serving:` and `deployment:` sections: the continuous-batching scheduler's limits, the
// paged KV cache, preemption, SLOs for goodput, the engine whose step costs are charged, and how
// the cluster's GPUs are split into instances, attention groups and pools.
#include <cstdint>
#include <optional>

#include "models/model_spec.hpp"
#include "policies/policy.hpp"
#include "serving/engine_profile.hpp"

namespace moesim {

enum class Preemption { kRecompute, kSwap };

/// How a rank admits a waiting request into the running batch.
enum class Admission {
  /// KV blocks are taken as the context grows; a full cache preempts the newest request (vLLM).
  kOnDemand,
  /// Blocks for the whole request (prompt + every output token) are reserved at admission, so a
  /// running request never waits for a block and nothing is preempted: TensorRT-LLM's
  /// GUARANTEED_NO_EVICT capacity scheduler.
  kReserveFull,
};

/// How prefill and decode share a step.
enum class StepMix {
  /// Running requests first (decodes and the next chunks of prompts), then new prompts, in one
  /// step within the token budget: vLLM V1's scheduler and TensorRT-LLM's in-flight batching.
  kMixed,
  /// A step is a prefill step (the chunked prompt's next chunk and new prompts, no decodes)
  /// whenever there is prefill to run, else a decode step of the running requests: SGLang's
  /// scheduler without --enable-mixed-chunk ("Run prefill first if possible").
  kPrefillFirst,
};

/// `serving.speculative`: speculative decoding. Every decode step verifies `draft_tokens` drafted
/// tokens per sequence (the step runs 1 + draft_tokens query tokens per sequence through the
/// model), after the drafts themselves ran: `draft_tokens` sequential passes of the draft, one
/// new token per sequence each. Of the drafts, a sequence keeps the longest accepted prefix, each
/// draft accepted with probability `acceptance_rate` given the previous one was (seeded per
/// request and position), plus the target model's own token.
struct SpeculativeConfig {
  enum class Method { kNone, kMtp, kDraftModel };
  Method method = Method::kNone;
  int draft_tokens = 1;
  double acceptance_rate = 0.8;
  /// The draft's layers: the model's MTP module(s) (DeepSeek-V3 §2.2; TensorRT-LLM and SGLang run
  /// the module once per draft token), or a separate small model.
  ModelSpec draft;
  bool enabled() const { return method != Method::kNone; }
  /// Query tokens a decode step runs per sequence.
  std::int64_t verify_tokens() const { return enabled() ? 1 + draft_tokens : 1; }
};

/// `serving:` (vLLM's scheduler knobs, per attention data-parallel rank).
struct SchedulerConfig {
  std::int64_t max_num_seqs = 256;          ///< running sequences per rank
  std::int64_t max_batched_tokens = 8192;   ///< new tokens per rank per step
  bool chunked_prefill = true;              ///< a prompt may be split over steps
  std::int64_t kv_block_tokens = 16;        ///< tokens per KV block
  Preemption preemption = Preemption::kRecompute;
  Admission admission = Admission::kOnDemand;
  StepMix step_mix = StepMix::kMixed;
  double gpu_memory_utilization = 0.9;      ///< fraction of GPU memory the engine may use (vLLM)
  /// TensorRT-LLM's kv_cache_free_gpu_mem_fraction: when set, the KV cache takes this fraction of
  /// the memory left after weights and activations (gpu_memory_utilization is then not used).
  std::optional<double> kv_cache_free_memory_fraction;
  std::optional<double> slo_ttft_ms;        ///< serving.slo.ttft_ms (goodput)
  std::optional<double> slo_tpot_ms;        ///< serving.slo.tpot_ms (goodput)
  double progress_interval_s = 0.5;         ///< wall seconds between `moesim run` progress redraws (no effect on results)
  EngineProfile engine;                     ///< serving.engine: step costs outside the kernels
  SpeculativeConfig speculative;            ///< serving.speculative (MTP, draft model)
  /// serving.two_batch_overlap: each step split into two micro-batches whose computation overlaps
  /// the other's expert dispatch and combine (SGLang --enable-two-batch-overlap, DeepSeek's
  /// inference system).
  bool two_batch_overlap = false;
  /// serving.layer_sampling: plan one MoE layer in every this many, standing for its block (an
  /// approximation for large searches, LayerSample); 1: every layer (exact).
  int layer_sampling = 1;
};

/// How one pool's GPUs run the model: attention groups of `tensor_parallel` GPUs (heads split,
/// hidden state all-reduced), `data_parallel` such groups per instance (each its own scheduler
/// and KV cache), experts spread over the instance's TP × DP GPUs (expert_parallel) or
/// tensor-parallel inside each attention group. `instances` independent copies of the model.
struct ParallelLayout {
  int tensor_parallel = 1;
  int data_parallel = 1;      ///< 0: every GPU of the pool (today's default: DP over the pool)
  bool expert_parallel = true;
  /// With expert_parallel false: the group's experts split over this many of its GPUs, each
  /// sharded over tensor_parallel / moe_expert_parallel of them (TensorRT-LLM's moe_ep_size).
  int moe_expert_parallel = 1;
  int instances = 0;          ///< 0: auto (GPUs / (TP × DP))
  int gpus = 0;               ///< GPUs of the pool (0: every GPU the others leave)
  int gpus_per_instance() const { return tensor_parallel * data_parallel; }
};

/// `deployment:`: colocated (one layout over the cluster), disaggregated into a prefill pool
/// (GPUs [0, prefill_gpus)) and a decode pool (the next decode_gpus GPUs), each with its layout,
/// or split into attention GPUs [0, attention_gpus) and expert GPUs (the rest), which the serving
/// engine runs in layer-queue mode (serving/amoe/layer_queues.hpp).
struct DeploymentConfig {
  ParallelLayout colocated;
  ParallelLayout prefill;
  ParallelLayout decode;
  int prefill_gpus = 0;
  int decode_gpus = 0;
  /// Kernels of the expert-parallel dispatch and combine in every pool (deployment.alltoall).
  MoeAllToAll alltoall = MoeAllToAll::kNccl;
  int attention_gpus = 0;  ///< attention–FFN split: attention GPUs (0: no split)
  int expert_gpus = 0;     ///< and expert GPUs, after them
  bool disaggregated() const { return prefill_gpus > 0; }
  bool attention_expert_split() const { return attention_gpus > 0; }
};

}  // namespace moesim
