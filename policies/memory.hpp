#pragma once
// Per-GPU memory of a policy's layout: weights (non-expert, replicated, plus the policy's
// experts and buffers), KV cache and the busiest layer's activations. The runner checks that a
// layout fits; policies that add expert copies at run time (duplication, shadowing) bound them by
// the headroom this leaves.
#include <cstdint>
#include <string>
#include <vector>

#include "policies/policy.hpp"

namespace moesim {

/// Per-GPU memory of a policy's layout for one batch.
struct MemoryEstimate {
  std::vector<double> weights;      ///< replicated non-expert weights + the policy's experts
  std::vector<double> kv_cache;     ///< home tokens × layers
  std::vector<double> activations;  ///< peak working set of one layer
  std::vector<double> total() const;
};

/// `expert_tokens[g]`: selections GPU g computes in its busiest layer. `tensor_parallel`: GPUs
/// of an attention group, which split the non-expert weights and the KV heads between them.
MemoryEstimate estimate_memory(const ModelSpec& m, const Cluster& c, const Policy& policy,
                               const PolicyContext& ctx, const std::vector<std::int64_t>& home_tokens,
                               const std::vector<std::int64_t>& expert_tokens, int tensor_parallel = 1);

/// Tokens whose hidden states live on each GPU (contiguous blocks of the batch's sequences).
std::vector<std::int64_t> home_tokens_of(const PrefillWorkload& w, int gpus);
/// Selections per GPU if the layer were perfectly balanced (the memory check's working set).
std::vector<std::int64_t> balanced_selections(const ModelSpec& m, const std::vector<std::int64_t>& home);

/// Activation elements one token's attention keeps: residual stream, normed copy, attention
/// output and its QKV rows (multiply by the dtype's bytes).
double attention_activation_elements(const ModelSpec& m);

/// "12.3 GB" (decimal gigabytes, three significant digits) for error messages.
std::string gigabytes(double bytes);

/// Bytes left on each GPU once `policy`'s layout, the KV cache and a balanced layer's
/// activations are in place (negative when it does not fit).
std::vector<double> memory_headroom(const Policy& policy, const PolicyContext& ctx);

}  // namespace moesim
