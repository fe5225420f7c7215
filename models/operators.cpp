// Per-layer operator lists for prefill, with FLOPs and HBM bytes from their shapes. GEMMs come
// from make_gemm / make_grouped_gemm; norms, activations and residual adds are elementwise.
#include "models/operators.hpp"

#include <algorithm>

namespace moesim {
namespace {

double d(std::int64_t v) { return static_cast<double>(v); }

/// Query-key pairs one sequence of `len` tokens attends over. Causal: position p sees
/// min(p+1, W) keys, W the window (unbounded when 0). Bidirectional (encoders): each token sees
/// min(len, W) keys.
double attention_pairs(std::int64_t len, std::int64_t window, bool causal) {
  const std::int64_t w = window > 0 ? std::min(window, len) : len;
  if (!causal) return d(len) * d(w);
  // sum_{p<w} (p+1) + (len - w)·w
  return d(w) * d(w + 1) / 2.0 + d(len - w) * d(w);
}

/// Up projection, activation and down projection of a dense FFN of width `ffn` over `rows`
/// tokens; SwiGLU's up projection produces gate and up halves (2·ffn columns).
void append_ffn(std::vector<Op>& ops, const ModelSpec& m, std::int64_t rows, std::int64_t ffn,
                const char* up, const char* act, const char* down) {
  const bool glu = m.activation == Activation::kSwiGlu;
  ops.push_back(make_gemm(up, rows, ffn * (glu ? 2 : 1), m.hidden, m.dtype));
  // SwiGLU reads gate and up (2·ffn) and writes ffn: 1.5 read-write passes over rows·ffn.
  ops.push_back(make_elementwise(act, d(rows) * d(ffn) * (glu ? 1.5 : 1.0), m.dtype));
  ops.push_back(make_gemm(down, rows, m.hidden, ffn, m.dtype));
}

}  // namespace

std::vector<Op> attention_ops(const ModelSpec& m, std::int64_t sequences, std::int64_t seq_len) {
  const AttentionSpec& a = m.attention;
  const std::int64_t tokens = sequences * seq_len;
  const DType dt = m.dtype;
  std::vector<Op> ops;
  ops.push_back(make_elementwise("attn.norm", d(tokens) * d(m.hidden), dt));

  // Per-head dims of queries/keys and values, and heads whose K/V the core reads.
  std::int64_t qk_dim = a.head_dim, v_dim = a.head_dim, kv_heads = a.kv_heads;
  if (a.kind == AttentionKind::kMla) {
    // DeepSeek-V2 §2.1.2: prefill decompresses the latent into per-head K and V (kv_b), so the
    // core runs as multi-head attention with qk = nope + rope dims and v_head_dim values.
    qk_dim = a.qk_nope_head_dim + a.qk_rope_head_dim;
    v_dim = a.v_head_dim;
    kv_heads = a.heads;
    const std::int64_t q_cols = a.heads * qk_dim;
    if (a.q_lora_rank > 0) {
      ops.push_back(make_gemm("attn.q_a", tokens, a.q_lora_rank, m.hidden, dt));
      ops.push_back(make_elementwise("attn.q_norm", d(tokens) * a.q_lora_rank, dt));
      ops.push_back(make_gemm("attn.q_b", tokens, q_cols, a.q_lora_rank, dt));
    } else {
      ops.push_back(make_gemm("attn.q", tokens, q_cols, m.hidden, dt));
    }
    ops.push_back(make_gemm("attn.kv_a", tokens, a.kv_lora_rank + a.qk_rope_head_dim, m.hidden, dt));
    ops.push_back(make_elementwise("attn.kv_norm", d(tokens) * a.kv_lora_rank, dt));
    ops.push_back(make_gemm("attn.kv_b", tokens, a.heads * (a.qk_nope_head_dim + v_dim), a.kv_lora_rank, dt));
  } else {
    ops.push_back(make_gemm("attn.qkv", tokens, (a.heads + 2 * a.kv_heads) * a.head_dim, m.hidden, dt));
  }

  // Score (QK^T) and value (PV) products over the attended pairs, flash-attention style: the
  // score matrix stays on chip, so HBM sees Q, K, V read once and O written once.
  const double pairs = attention_pairs(seq_len, a.window, a.causal);
  Op core;
  core.kind = OpKind::kAttention;
  core.name = "attn.core";
  core.dtype = dt;
  core.m = seq_len;
  core.n = a.window > 0 ? std::min(a.window, seq_len) : seq_len;
  core.k = qk_dim;
  core.batch = sequences * a.heads;
  core.flops = 2.0 * d(sequences) * a.heads * pairs * d(qk_dim + v_dim);
  core.bytes = dtype_bytes(dt) * d(tokens) *
               (d(a.heads) * d(qk_dim) + d(kv_heads) * d(qk_dim + v_dim) + d(a.heads) * d(v_dim));
  ops.push_back(core);

  ops.push_back(make_gemm("attn.out", tokens, m.hidden, a.heads * v_dim, dt));
  ops.push_back(make_elementwise("attn.residual", d(tokens) * d(m.hidden), dt));
  return ops;
}

std::vector<Op> router_ops(const ModelSpec& m, std::int64_t tokens) {
  std::vector<Op> ops;
  ops.push_back(make_elementwise("router.norm", d(tokens) * d(m.hidden), m.dtype));
  ops.push_back(make_gemm("router.gate", tokens, m.experts, m.hidden, m.dtype));
  ops.push_back(make_elementwise("router.topk", d(tokens) * m.experts, m.dtype));
  return ops;
}

std::vector<Op> expert_ops(const ModelSpec& m, const std::vector<std::int64_t>& tokens_per_expert) {
  std::int64_t rows = 0;
  for (const auto t : tokens_per_expert) rows += std::max<std::int64_t>(t, 0);
  if (rows == 0) return {};  // no tokens: no kernel runs and no weights are read
  const bool glu = m.activation == Activation::kSwiGlu;
  std::vector<Op> ops;
  ops.push_back(make_grouped_gemm("expert.up", tokens_per_expert, m.expert_ffn * (glu ? 2 : 1), m.hidden, m.dtype));
  ops.push_back(make_elementwise("expert.act", d(rows) * d(m.expert_ffn) * (glu ? 1.5 : 1.0), m.dtype));
  ops.push_back(make_grouped_gemm("expert.down", tokens_per_expert, m.hidden, m.expert_ffn, m.dtype));
  return ops;
}

std::vector<Op> sharded_expert_ops(const ModelSpec& m, const std::vector<std::int64_t>& tokens_per_expert,
                                   int shards, bool fused) {
  std::int64_t rows = 0;
  for (const auto t : tokens_per_expert) rows += std::max<std::int64_t>(t, 0);
  if (rows == 0 || shards < 1) return {};
  const bool glu = m.activation == Activation::kSwiGlu;
  const std::int64_t width = (m.expert_ffn + shards - 1) / shards;
  std::vector<Op> ops;
  if (fused) {
    ops.push_back(make_grouped_gemm("expert_shard.up", tokens_per_expert, width * (glu ? 2 : 1), m.hidden, m.dtype));
    ops.push_back(make_elementwise("expert_shard.act", d(rows) * d(width) * (glu ? 1.5 : 1.0), m.dtype));
    ops.push_back(make_grouped_gemm("expert_shard.down", tokens_per_expert, m.hidden, width, m.dtype));
    return ops;
  }
  for (const auto t : tokens_per_expert)
    if (t > 0) append_ffn(ops, m, t, width, "expert_shard.up", "expert_shard.act", "expert_shard.down");
  return ops;
}

std::vector<Op> shared_expert_ops(const ModelSpec& m, std::int64_t tokens) {
  if (m.shared_experts <= 0 || m.shared_expert_ffn <= 0 || tokens <= 0) return {};
  // Every token goes through every shared expert, so they run as one FFN of the summed width
  // (as DeepSeek's implementation builds them).
  std::vector<Op> ops;
  append_ffn(ops, m, tokens, m.shared_experts * m.shared_expert_ffn, "shared.up", "shared.act", "shared.down");
  return ops;
}

std::vector<Op> dense_ffn_ops(const ModelSpec& m, std::int64_t tokens) {
  std::vector<Op> ops;
  ops.push_back(make_elementwise("ffn.norm", d(tokens) * d(m.hidden), m.dtype));
  append_ffn(ops, m, tokens, m.dense_ffn, "ffn.up", "ffn.act", "ffn.down");
  ops.push_back(make_elementwise("ffn.residual", d(tokens) * d(m.hidden), m.dtype));
  return ops;
}

std::vector<Op> combine_ops(const ModelSpec& m, std::int64_t tokens) {
  std::vector<Op> ops;
  // Gate-weighted sum of the top-k expert outputs: one multiply-add per element.
  ops.push_back(make_elementwise("combine.weighted_sum", d(tokens) * m.top_k * d(m.hidden), m.dtype, 2.0));
  ops.push_back(make_elementwise("combine.residual", d(tokens) * d(m.hidden), m.dtype));
  return ops;
}

double token_bytes(const ModelSpec& m) { return d(m.hidden) * dtype_bytes(m.dtype); }

double kv_cache_bytes_per_token_layer(const ModelSpec& m) {
  const AttentionSpec& a = m.attention;
  // MLA caches the compressed latent and the shared rope key (DeepSeek-V2 §2.1.2).
  if (a.kind == AttentionKind::kMla) return d(a.kv_lora_rank + a.qk_rope_head_dim) * dtype_bytes(m.dtype);
  return 2.0 * a.kv_heads * a.head_dim * dtype_bytes(m.dtype);
}

}  // namespace moesim
