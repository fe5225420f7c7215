#pragma once
// The `serving:` and `deployment:` sections: the continuous-batching scheduler's limits, the
// paged KV cache, preemption, SLOs for goodput, and how GPUs are split into pools.
#include <cstdint>
#include <optional>

namespace moesim {

enum class Preemption { kRecompute, kSwap };

/// `serving:` (vLLM's scheduler knobs, per attention data-parallel rank).
struct SchedulerConfig {
  std::int64_t max_num_seqs = 256;          ///< running sequences per rank
  std::int64_t max_batched_tokens = 8192;   ///< new tokens per rank per step
  bool chunked_prefill = true;              ///< a prompt may be split over steps
  std::int64_t kv_block_tokens = 16;        ///< tokens per KV block
  Preemption preemption = Preemption::kRecompute;
  double gpu_memory_utilization = 0.9;      ///< fraction of GPU memory the engine may use (vLLM)
  std::optional<double> slo_ttft_ms;        ///< serving.slo.ttft_ms (goodput)
  std::optional<double> slo_tpot_ms;        ///< serving.slo.tpot_ms (goodput)
  double progress_interval_s = 0.5;         ///< wall seconds between `moesim run` progress redraws (no effect on results)
};

/// `deployment:`: colocated (both zero: every GPU prefills and decodes) or disaggregated into a
/// prefill pool (GPUs [0, prefill_gpus)) and a decode pool (the next decode_gpus GPUs).
struct DeploymentConfig {
  int prefill_gpus = 0;
  int decode_gpus = 0;
  bool disaggregated() const { return prefill_gpus > 0; }
};

}  // namespace moesim
