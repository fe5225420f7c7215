#pragma once
// Per-layer operator lists with FLOPs and bytes. Policies assemble these into tasks; cost models
// price them. Nothing here computes a time.
#include <cstdint>
#include <vector>

#include "models/model_spec.hpp"
#include "sim/work.hpp"

namespace moesim {

/// Prefill attention for `sequences` sequences of `seq_len` tokens on one GPU: input norm,
/// QKV (or MLA) projections, score/softmax/value (window- and causality-aware), output
/// projection, residual add.
std::vector<Op> attention_ops(const ModelSpec& m, std::int64_t sequences, std::int64_t seq_len);
/// Post-attention norm and router/gate GEMM with softmax/top-k over `tokens` tokens.
std::vector<Op> router_ops(const ModelSpec& m, std::int64_t tokens);
/// Routed experts on one GPU as one grouped GEMM per projection: `tokens_per_expert[i]` rows
/// for the i-th hosted expert (0 rows: the expert is skipped and its weights are not read).
std::vector<Op> expert_ops(const ModelSpec& m, const std::vector<std::int64_t>& tokens_per_expert);
/// Expert shards (MoEShard §3.2, tensor-parallel experts): every expert's W_in column shard and
/// W_out row shard of width ceil(expert_ffn / shards), over `tokens_per_expert[i]` rows each.
/// `fused`: one grouped GEMM per projection (MoEShard §3.3 with block-sparse kernels); otherwise
/// one GEMM per expert and projection, each paying its own kernel launch.
std::vector<Op> sharded_expert_ops(const ModelSpec& m, const std::vector<std::int64_t>& tokens_per_expert,
                                   int shards, bool fused);
/// Shared (always-on) experts over `tokens` tokens; empty when the model has none.
std::vector<Op> shared_expert_ops(const ModelSpec& m, std::int64_t tokens);
/// Dense FFN (non-MoE layer) over `tokens` tokens, with its norm and residual.
std::vector<Op> dense_ffn_ops(const ModelSpec& m, std::int64_t tokens);
/// Weighted sum of the top-k expert outputs and the residual add over `tokens` tokens.
std::vector<Op> combine_ops(const ModelSpec& m, std::int64_t tokens);

/// Bytes of one token's hidden state on the wire (dispatch and combine).
double token_bytes(const ModelSpec& m);
/// KV-cache bytes per token per layer (MLA caches the compressed latent).
double kv_cache_bytes_per_token_layer(const ModelSpec& m);

}  // namespace moesim
