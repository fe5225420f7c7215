#pragma once
// Workloads: what arrives to be served. Today: offline prefill batches. A request-level serving
// workload (arrivals, decode) will be a second kind next to this one.
#include <cstdint>
#include <string>
#include <vector>

namespace moesim {

/// `batches` batches, each of `batch_size` sequences of `seq_len` tokens, processed one after
/// another through the whole model (prefill only).
struct PrefillWorkload {
  std::int64_t batch_size = 1;
  std::int64_t seq_len = 128;
  std::int64_t batches = 1;
  /// The first `warmup_batches` batches run (and warm up what policies and predictors keep across
  /// batches, such as replicas) but are left out of the metrics.
  std::int64_t warmup_batches = 0;
  /// Attention tensor-parallel over every GPU (MoE-GPS §2: heads split, a ring all-reduce after
  /// attention, then each GPU holds an even share of the tokens for the MoE layer) instead of
  /// data-parallel (each GPU attends over the sequences it holds).
  bool tensor_parallel_attention = false;
  std::int64_t tokens_per_batch() const { return batch_size * seq_len; }
};

/// Sequences of a batch per GPU: contiguous blocks, sizes differing by at most one.
inline std::vector<std::int64_t> sequences_per_gpu(std::int64_t batch_size, int gpus) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(gpus));
  for (int g = 0; g < gpus; ++g) out[static_cast<std::size_t>(g)] = (g + 1) * batch_size / gpus - g * batch_size / gpus;
  return out;
}

}  // namespace moesim
