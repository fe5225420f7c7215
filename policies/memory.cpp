#include "policies/memory.hpp"

#include <sstream>

#include "models/operators.hpp"
#include "models/workload.hpp"

namespace moesim {

std::vector<double> MemoryEstimate::total() const {
  std::vector<double> t(weights.size());
  for (std::size_t g = 0; g < t.size(); ++g) t[g] = weights[g] + kv_cache[g] + activations[g];
  return t;
}

double attention_activation_elements(const ModelSpec& m) {
  const double qkv = static_cast<double>((m.attention.heads + 2 * m.attention.kv_heads) * m.attention.head_dim);
  return 3.0 * static_cast<double>(m.hidden) + qkv;
}

MemoryEstimate estimate_memory(const ModelSpec& m, const Cluster& c, const Policy& policy,
                               const PolicyContext& ctx, const std::vector<std::int64_t>& home_tokens,
                               const std::vector<std::int64_t>& expert_tokens, int tensor_parallel) {
  const int G = c.num_gpus();
  const double b = dtype_bytes(m.dtype);
  const std::vector<double> experts = policy.expert_memory_bytes(ctx);
  const auto ffn_width = static_cast<double>(policy.expert_intermediate_width(ctx));
  const double per_token = attention_activation_elements(m);
  MemoryEstimate e;
  for (int g = 0; g < G; ++g) {
    const double t = static_cast<double>(home_tokens[g]);
    // Megatron's split: attention, dense and shared-expert FFNs and the (vocabulary-parallel)
    // embeddings 1/TP per GPU of the group.
    e.weights.push_back(tensor_parallel > 1 ? m.non_expert_params() * b / tensor_parallel + experts[g]
                                            : m.non_expert_params() * b + experts[g]);
    e.kv_cache.push_back(tensor_parallel > 1 ? t * kv_cache_bytes_per_token_gpu(m, tensor_parallel)
                                             : t * static_cast<double>(m.num_kv_cache_layers()) * kv_cache_bytes_per_token_layer(m));
    // Residual stream, normed copy, attention output and QKV of the home tokens, plus the
    // received selections' input, intermediate and output rows.
    const double sel = static_cast<double>(expert_tokens[g]);
    e.activations.push_back(b * (t * per_token + sel * (2.0 * static_cast<double>(m.hidden) + ffn_width)));
  }
  return e;
}

std::vector<std::int64_t> home_tokens_of(const PrefillWorkload& w, int gpus) {
  std::vector<std::int64_t> home = sequences_per_gpu(w.batch_size, gpus);
  for (auto& h : home) h *= w.seq_len;
  return home;
}

std::vector<std::int64_t> balanced_selections(const ModelSpec& m, const std::vector<std::int64_t>& home) {
  std::int64_t tokens = 0;
  for (auto t : home) tokens += t;
  const auto G = static_cast<std::int64_t>(home.size());
  return std::vector<std::int64_t>(home.size(), (tokens * m.top_k + G - 1) / G);
}

std::string gigabytes(double bytes) {
  std::ostringstream os;
  os.precision(3);
  os << bytes / 1e9 << " GB";
  return os.str();
}

std::vector<double> memory_headroom(const Policy& policy, const PolicyContext& ctx) {
  const auto home = home_tokens_of(ctx.workload, ctx.cluster.num_gpus());
  const std::vector<double> used =
      estimate_memory(ctx.model, ctx.cluster, policy, ctx, home, balanced_selections(ctx.model, home)).total();
  std::vector<double> free(used.size());
  for (std::size_t g = 0; g < used.size(); ++g) free[g] = ctx.cluster.spec().gpu.memory_bytes - used[g];
  return free;
}

}  // namespace moesim
