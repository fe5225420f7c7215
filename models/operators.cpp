// Per-layer operator lists for prefill and serving steps, with FLOPs and HBM bytes from their
// shapes. GEMMs come from make_gemm / make_grouped_gemm; norms, activations and residual adds are
// elementwise; attention cores are priced by (query tokens, KV length) per sequence.
#include "models/operators.hpp"

#include <algorithm>
#include <utility>

namespace moesim {
namespace {

double d(std::int64_t v) { return static_cast<double>(v); }

/// sum_{p=1}^{n} min(p, W): keys seen by causal queries at positions 0..n-1 (W unbounded when 0).
double causal_prefix_pairs(std::int64_t n, std::int64_t window) {
  const std::int64_t w = window > 0 ? std::min(window, n) : n;
  // sum_{p<=w} p + (n - w)·w
  return d(w) * d(w + 1) / 2.0 + d(n - w) * d(w);
}

/// Query-key pairs of one chunk: causal query j (position context + j) sees min(context+j+1, W)
/// keys, so the chunk's pairs are a difference of prefix sums — chunking a prompt conserves them.
/// Bidirectional (encoders): each new token sees min(context + new, W) keys.
double chunk_pairs(const SeqChunk& c, std::int64_t window, bool causal) {
  const std::int64_t len = c.context + c.new_tokens;
  if (!causal) return d(c.new_tokens) * d(window > 0 ? std::min(window, len) : len);
  return causal_prefix_pairs(len, window) - causal_prefix_pairs(c.context, window);
}


/// One fused attention core's totals over the chunks it serves.
struct CoreTotals {
  std::int64_t sequences = 0;
  std::int64_t max_new = 0;       ///< most query tokens of one sequence
  std::int64_t max_keys = 0;      ///< most keys one query sees
  std::int64_t new_tokens = 0;    ///< query tokens (Q read, O written, own K/V counted once)
  std::int64_t cached_read = 0;   ///< cached positions read, once per sequence
  double pairs = 0.0;

  /// Adds one chunk (fields non-negative, new_tokens > 0).
  void add(const SeqChunk& c, const AttentionSpec& a) {
    const std::int64_t len = c.context + c.new_tokens;
    ++sequences;
    max_new = std::max(max_new, c.new_tokens);
    new_tokens += c.new_tokens;
    if (a.sparse()) {
      // DeepSeek Sparse Attention: query j attends min(context + j + 1, top-k) keys (as many as
      // under a window of top-k, though picked anywhere), and the chunk's queries read at most
      // top-k cached positions each: the core stops growing with the context beyond top-k.
      max_keys = std::max(max_keys, std::min(a.index_topk, len));
      cached_read += std::min(c.context, a.index_topk * c.new_tokens);
      pairs += chunk_pairs(c, a.index_topk, true);
      return;
    }
    max_keys = std::max(max_keys, a.window > 0 ? std::min(a.window, len) : len);
    // Causal queries at context..len-1 see keys from max(0, context - W + 1) on: at most W - 1
    // cached positions. Bidirectional ones see at most W keys, all of which may be cached.
    const std::int64_t reach = a.causal ? a.window - 1 : a.window;
    cached_read += a.window > 0 ? std::min(c.context, std::max<std::int64_t>(reach, 0)) : c.context;
    pairs += chunk_pairs(c, a.window, a.causal);
  }
};

/// Splits a step's chunks between the core kernels: MLA's absorbed chunks into `latent`, all
/// others into `full`. Negative fields count as 0; chunks without new tokens are dropped.
void split_chunks(std::span<const SeqChunk> seqs, const AttentionSpec& a, CoreTotals& full, CoreTotals& latent,
                  std::int64_t absorbed_max_new) {
  for (const SeqChunk& raw : seqs) {
    const SeqChunk c{std::max<std::int64_t>(raw.new_tokens, 0), std::max<std::int64_t>(raw.context, 0)};
    if (c.new_tokens == 0) continue;
    // DSA runs MLA in its MQA (absorbed) form for prefill and decode alike (DeepSeek-V3.2 §2.1).
    const bool absorbed = a.kind == AttentionKind::kMla && (a.sparse() || mla_absorbed(c, absorbed_max_new));
    (absorbed ? latent : full).add(c, a);
  }
}

/// The fused core over `t`: 2·heads·pairs·(qk_dim + v_dim) FLOPs; HBM bytes are Q read and O
/// written per query token and `kv_elems` per attended position (cached or new), read once per
/// sequence (flash-attention / paged attention: scores never reach HBM).
Op attention_core(const char* name, const CoreTotals& t, int heads, int kv_heads, std::int64_t qk_dim,
                  std::int64_t v_dim, double kv_elems, DType dt, DType kv_dt, AttentionForm form) {
  Op core;
  core.kind = OpKind::kAttention;
  core.name = name;
  core.dtype = dt;
  core.heads = heads;
  core.kv_heads = kv_heads;
  core.attention = form;
  core.kv_dtype = kv_dt;
  core.m = t.max_new;
  core.n = t.max_keys;
  core.k = qk_dim;
  core.batch = t.sequences * heads;
  core.flops = 2.0 * d(heads) * t.pairs * d(qk_dim + v_dim);
  // K and V are read (and the new tokens' written) in the KV cache's type.
  const double qo = d(t.new_tokens) * (d(heads) * d(qk_dim) + d(heads) * d(v_dim));
  const double kv = d(t.new_tokens + t.cached_read) * kv_elems;
  core.bytes = kv_dt == dt ? dtype_bytes(dt) * (qo + kv) : dtype_bytes(dt) * qo + dtype_bytes(kv_dt) * kv;
  return core;
}

/// MLA's ops after the shared projections (DeepSeek-V2 §2.1.2). Decompressed chunks: kv_b over
/// their new tokens and the cached latents they attend, then multi-head attention with
/// qk = nope + rope dims and v_head_dim values. Absorbed chunks: W^UK folded into the query
/// (per-head q_nope·W^UK, a GEMM batched over heads), attention over the latent cache (queries
/// and keys of kv_lora_rank + rope dims, values of kv_lora_rank, one cached copy shared by all
/// heads, like MQA), then W^UV applied to the per-head latent output.
void append_mla_core(std::vector<Op>& ops, const ModelSpec& m, const CoreTotals& full, const CoreTotals& latent) {
  const AttentionSpec& a = m.attention;
  const DType dt = m.dtype;
  if (full.sequences > 0) {
    const std::int64_t qk_dim = a.qk_nope_head_dim + a.qk_rope_head_dim;
    ops.push_back(make_gemm("attn.kv_b", full.new_tokens + full.cached_read,
                            static_cast<std::int64_t>(a.heads) * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank, dt));
    ops.push_back(attention_core("attn.core", full, a.heads, a.heads, qk_dim, a.v_head_dim,
                                 d(a.heads) * d(qk_dim + a.v_head_dim), dt, dt, AttentionForm::kMlaFull));
  }
  if (latent.sequences > 0) {
    const std::int64_t rows = latent.new_tokens;
    ops.push_back(make_gemm("attn.q_absorb", rows, a.kv_lora_rank, a.qk_nope_head_dim, dt, a.heads));
    ops.push_back(attention_core("attn.core_latent", latent, a.heads, 1, a.kv_lora_rank + a.qk_rope_head_dim,
                                 a.kv_lora_rank, d(a.kv_lora_rank + a.qk_rope_head_dim), dt, m.kv_cache_dtype(),
                                 AttentionForm::kMlaLatent));
    ops.push_back(make_gemm("attn.v_absorb", rows, a.v_head_dim, a.kv_lora_rank, dt, a.heads));
  }
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

/// DeepSeek-V3.2's lightning indexer (§2.1) over a step's chunks: its query projection from the
/// q latent, its one shared key and per-head weights from the hidden state, then the FP8 scores
/// of every query against every key it may attend (causal; the index keys of the cached
/// positions read once per sequence, fp8 plus a 4-byte scale each; the fp32 logits written and
/// read back by the top-k selection).
void append_indexer(std::vector<Op>& ops, const ModelSpec& m, std::span<const SeqChunk> seqs, std::int64_t tokens) {
  const AttentionSpec& a = m.attention;
  const DType dt = m.dtype;
  const std::int64_t q_in = a.q_lora_rank > 0 ? a.q_lora_rank : m.hidden;
  ops.push_back(make_gemm("attn.index_q", tokens, static_cast<std::int64_t>(a.index_heads) * a.index_head_dim, q_in, dt));
  ops.push_back(make_gemm("attn.index_k", tokens, a.index_head_dim, m.hidden, dt));
  ops.push_back(make_gemm("attn.index_w", tokens, a.index_heads, m.hidden, dt));
  double pairs = 0.0, keys = 0.0;
  std::int64_t sequences = 0, max_new = 0, max_keys = 0;
  for (const SeqChunk& raw : seqs) {
    const SeqChunk c{std::max<std::int64_t>(raw.new_tokens, 0), std::max<std::int64_t>(raw.context, 0)};
    if (c.new_tokens == 0) continue;
    ++sequences;
    max_new = std::max(max_new, c.new_tokens);
    max_keys = std::max(max_keys, c.context + c.new_tokens);
    pairs += chunk_pairs(c, 0, true);
    keys += d(c.context + c.new_tokens);
  }
  Op idx;
  idx.kind = OpKind::kAttention;
  idx.name = "attn.indexer";
  idx.attention = AttentionForm::kIndexer;
  idx.dtype = DType::kFp8;
  idx.kv_dtype = DType::kFp8;
  idx.heads = a.index_heads;
  idx.kv_heads = 1;
  idx.m = max_new;
  idx.n = max_keys;
  idx.k = a.index_head_dim;
  idx.batch = sequences * a.index_heads;
  idx.flops = 2.0 * a.index_heads * d(a.index_head_dim) * pairs;
  idx.bytes = keys * (d(a.index_head_dim) + 4.0) + d(tokens) * a.index_heads * (d(a.index_head_dim) + 4.0) + 8.0 * pairs;
  ops.push_back(idx);
}

/// Chunk length of the chunked gated delta rule (flash-linear-attention's kernels, which vLLM
/// and SGLang run for Qwen3-Next/Qwen3.5 prefill): within a chunk tokens interact as in
/// attention, across chunks only through the state.
constexpr std::int64_t kDeltaRuleChunk = 64;

/// Intra-chunk query-key pairs of `n` new tokens cut into kDeltaRuleChunk-token chunks.
double delta_rule_pairs(std::int64_t n) {
  const std::int64_t whole = n / kDeltaRuleChunk, rest = n % kDeltaRuleChunk;
  return d(whole) * causal_prefix_pairs(kDeltaRuleChunk, 0) + causal_prefix_pairs(rest, 0);
}

}  // namespace

std::vector<Op> linear_attention_step_ops(const ModelSpec& m, std::span<const SeqChunk> seqs) {
  const LinearAttentionSpec& l = m.linear_attention;
  const DType dt = m.dtype;
  std::int64_t tokens = 0, sequences = 0, max_new = 0;
  double intra = 0.0;
  for (const SeqChunk& c : seqs) {
    if (c.new_tokens <= 0) continue;
    tokens += c.new_tokens;
    ++sequences;
    max_new = std::max(max_new, c.new_tokens);
    intra += delta_rule_pairs(c.new_tokens);
  }
  if (tokens == 0 || !l.present()) return {};
  const double kd = l.key_head_dim, vd = l.value_head_dim, vh = l.value_heads;
  const double v = vh * vd;
  const auto channels = l.conv_channels();
  std::vector<Op> ops;
  ops.reserve(9);
  ops.push_back(make_elementwise("lin.norm", d(tokens) * d(m.hidden), dt));
  const std::int64_t v_width = static_cast<std::int64_t>(l.value_heads) * l.value_head_dim;
  ops.push_back(make_gemm("lin.in_proj", tokens, channels + v_width, m.hidden, dt));
  ops.push_back(make_gemm("lin.in_proj_ba", tokens, 2LL * l.value_heads, m.hidden, dt));
  // Causal depthwise convolution over q/k/v: each sequence's conv_kernel - 1 previous inputs come
  // from its conv state (read and written back), 2·conv_kernel FLOPs per output.
  ops.push_back(make_elementwise("lin.conv", d(tokens + sequences * (l.conv_kernel - 1)) * d(channels), dt,
                                 2.0 * l.conv_kernel));
  // The gated delta rule per value head: per token the state is decayed, corrected toward v
  // along k and read by q (3 state-sized products, 6·dk·dv FLOPs), plus the intra-chunk pairs'
  // q·k and mixing of v (2·(2·dk + dv) each). HBM: the state read and written once per sequence
  // (it stays on chip across a chunk's tokens), q, k (key heads), v, gates in and o out per token.
  Op core;
  core.kind = OpKind::kAttention;
  core.name = "lin.core";
  core.attention = AttentionForm::kLinear;
  core.dtype = dt;
  core.kv_dtype = l.state_dtype;
  core.heads = l.value_heads;
  core.kv_heads = l.key_heads;
  core.m = max_new;
  core.n = l.key_head_dim;
  core.k = l.value_head_dim;
  core.batch = sequences * l.value_heads;
  core.flops = vh * (d(tokens) * 6.0 * kd * vd + intra * 2.0 * (2.0 * kd + vd));
  const double state = d(sequences) * vh * kd * vd * dtype_bytes(l.state_dtype);
  core.bytes = 2.0 * state + d(tokens) * (2.0 * l.key_heads * kd + 2.0 * v + 2.0 * vh) * dtype_bytes(dt);
  ops.push_back(core);
  // Gated RMSNorm: o normalised per head and multiplied by silu(z).
  ops.push_back(make_elementwise("lin.norm_gate", d(tokens) * v * 1.5, dt));
  ops.push_back(make_gemm("lin.out", tokens, m.hidden, v_width, dt));
  ops.push_back(make_elementwise("lin.residual", d(tokens) * d(m.hidden), dt));
  return ops;
}

std::vector<Op> local_attention_step_ops(const ModelSpec& m, std::span<const SeqChunk> seqs,
                                         std::int64_t absorbed_max_new) {
  if (m.linear_attention.present()) return linear_attention_step_ops(m, seqs);
  return attention_step_ops(m, seqs, -1, absorbed_max_new);
}

std::vector<Op> layer_attention_step_ops(const ModelSpec& m, int layer, std::span<const SeqChunk> seqs,
                                         std::int64_t absorbed_max_new) {
  if (m.is_linear_attention_layer(layer)) return linear_attention_step_ops(m, seqs);
  return attention_step_ops(m, seqs, m.window_of_layer(layer), absorbed_max_new);
}

bool mla_absorbed(const SeqChunk& c, std::int64_t max_new) {
  return c.context > 0 && c.new_tokens > 0 && c.new_tokens <= max_new;
}

std::vector<Op> attention_step_ops(const ModelSpec& model, std::span<const SeqChunk> seqs, std::int64_t window,
                                   std::int64_t absorbed_max_new) {
  ModelSpec windowed;
  if (window >= 0 && window != model.attention.window) {
    windowed = model;
    windowed.attention.window = window;
  }
  const ModelSpec& m = window >= 0 && window != model.attention.window ? windowed : model;
  const AttentionSpec& a = m.attention;
  const DType dt = m.dtype;
  CoreTotals full, latent;
  split_chunks(seqs, a, full, latent, absorbed_max_new);
  const std::int64_t tokens = full.new_tokens + latent.new_tokens;
  if (tokens == 0) return {};
  std::vector<Op> ops;
  ops.reserve(16);  // every kind's ops at once (MLA's are the most)
  ops.push_back(make_elementwise("attn.norm", d(tokens) * d(m.hidden), dt));

  std::int64_t v_dim = a.head_dim;
  if (a.kind == AttentionKind::kMla) {
    // Queries (through the q latent when q_lora_rank > 0) and the compressed KV latent plus the
    // shared rope key, over the step's new tokens whichever form each chunk then takes.
    v_dim = a.v_head_dim;
    const std::int64_t q_cols = static_cast<std::int64_t>(a.heads) * (a.qk_nope_head_dim + a.qk_rope_head_dim);
    if (a.q_lora_rank > 0) {
      ops.push_back(make_gemm("attn.q_a", tokens, a.q_lora_rank, m.hidden, dt));
      ops.push_back(make_elementwise("attn.q_norm", d(tokens) * a.q_lora_rank, dt));
      ops.push_back(make_gemm("attn.q_b", tokens, q_cols, a.q_lora_rank, dt));
    } else {
      ops.push_back(make_gemm("attn.q", tokens, q_cols, m.hidden, dt));
    }
    ops.push_back(make_gemm("attn.kv_a", tokens, a.kv_lora_rank + a.qk_rope_head_dim, m.hidden, dt));
    ops.push_back(make_elementwise("attn.kv_norm", d(tokens) * a.kv_lora_rank, dt));
    if (a.sparse()) append_indexer(ops, m, seqs, tokens);
    append_mla_core(ops, m, full, latent);
  } else {
    // A gated attention's query projection also yields the output gate (heads · head_dim more).
    const std::int64_t q_heads = a.output_gate ? 2 * a.heads : a.heads;
    ops.push_back(make_gemm("attn.qkv", tokens, (q_heads + 2 * a.kv_heads) * a.head_dim, m.hidden, dt));
    // One varlen kernel over every chunk (prefill and decode alike, as in chunked prefill).
    ops.push_back(attention_core("attn.core", full, a.heads, a.kv_heads, a.head_dim, a.head_dim,
                                 d(a.kv_heads) * d(2 * a.head_dim), dt, m.kv_cache_dtype(), AttentionForm::kGqa));
    if (a.output_gate) ops.push_back(make_elementwise("attn.gate", d(tokens) * a.heads * a.head_dim * 1.5, dt));
  }

  ops.push_back(make_gemm("attn.out", tokens, m.hidden, a.heads * v_dim, dt));
  ops.push_back(make_elementwise("attn.residual", d(tokens) * d(m.hidden), dt));
  return ops;
}

std::vector<Op> attention_ops(const ModelSpec& m, std::int64_t sequences, std::int64_t seq_len) {
  if (sequences <= 0 || seq_len <= 0) return {};
  const std::vector<SeqChunk> seqs(static_cast<std::size_t>(sequences), SeqChunk{seq_len, 0});
  return attention_step_ops(m, seqs);
}

std::vector<Op> router_ops(const ModelSpec& m, std::int64_t tokens) {
  std::vector<Op> ops;
  ops.reserve(3);
  ops.push_back(make_elementwise("router.norm", d(tokens) * d(m.hidden), m.dtype));
  ops.push_back(make_gemm("router.gate", tokens, m.experts, m.hidden, m.dtype));
  ops.push_back(make_elementwise("router.topk", d(tokens) * m.experts, m.dtype));
  return ops;
}

std::vector<Op> expert_ops(const ModelSpec& m, std::vector<std::int64_t> tokens_per_expert) {
  std::int64_t rows = 0;
  for (const auto t : tokens_per_expert) rows += std::max<std::int64_t>(t, 0);
  if (rows == 0) return {};  // no tokens: no kernel runs and no weights are read
  const bool glu = m.activation == Activation::kSwiGlu;
  std::vector<Op> ops;
  ops.reserve(3);
  const DType math = m.expert_compute_dtype(), weights = m.expert_weight_dtype();
  ops.push_back(make_quantized_grouped_gemm("expert.up", tokens_per_expert, m.expert_ffn * (glu ? 2 : 1), m.hidden,
                                            math, weights));
  ops.push_back(make_elementwise("expert.act", d(rows) * d(m.expert_ffn) * (glu ? 1.5 : 1.0), m.dtype));
  // The last op takes the counts themselves (an allocation less per GPU and layer).
  ops.push_back(make_quantized_grouped_gemm("expert.down", std::move(tokens_per_expert), m.hidden, m.expert_ffn, math, weights));
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
  const DType math = m.expert_compute_dtype(), weights = m.expert_weight_dtype();
  if (fused) {
    ops.push_back(make_quantized_grouped_gemm("expert_shard.up", tokens_per_expert, width * (glu ? 2 : 1), m.hidden,
                                              math, weights));
    ops.push_back(make_elementwise("expert_shard.act", d(rows) * d(width) * (glu ? 1.5 : 1.0), m.dtype));
    ops.push_back(make_quantized_grouped_gemm("expert_shard.down", tokens_per_expert, m.hidden, width, math, weights));
    return ops;
  }
  for (const auto t : tokens_per_expert) {
    if (t <= 0) continue;
    ops.push_back(make_quantized_gemm("expert_shard.up", t, width * (glu ? 2 : 1), m.hidden, math, weights));
    ops.push_back(make_elementwise("expert_shard.act", d(t) * d(width) * (glu ? 1.5 : 1.0), m.dtype));
    ops.push_back(make_quantized_gemm("expert_shard.down", t, m.hidden, width, math, weights));
  }
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
  const double b = dtype_bytes(m.kv_cache_dtype());
  // DSA's indexer keeps its own key per token: index_head_dim fp8 values and an fp32 scale.
  const double index = a.sparse() ? d(a.index_head_dim) + 4.0 : 0.0;
  if (a.kind == AttentionKind::kMla) return d(a.kv_lora_rank + a.qk_rope_head_dim) * b + index;
  return 2.0 * a.kv_heads * a.head_dim * b;
}

double kv_cache_bytes_per_token(const ModelSpec& m) {
  return d(m.num_kv_cache_layers()) * kv_cache_bytes_per_token_layer(m);
}

double linear_state_bytes_per_sequence(const ModelSpec& m) {
  const LinearAttentionSpec& l = m.linear_attention;
  if (!l.present()) return 0.0;
  // The delta rule's state per value head (state_dtype) and the convolution's last
  // conv_kernel - 1 inputs (bf16, as the engines keep it), in every linear-attention layer.
  const double state = d(l.value_heads) * l.key_head_dim * l.value_head_dim * dtype_bytes(l.state_dtype);
  const double conv = d(std::max(l.conv_kernel - 1, 0)) * d(l.conv_channels()) * dtype_bytes(DType::kBf16);
  return d(m.layers - m.num_kv_cache_layers()) * (state + conv);
}

double linear_state_bytes_per_sequence_gpu(const ModelSpec& m, int tp) {
  return linear_state_bytes_per_sequence(tensor_parallel_slice(m, tp));
}

ModelSpec tensor_parallel_slice(const ModelSpec& m, int tp) {
  if (tp <= 1) return m;
  const auto split = [tp](std::int64_t n) { return (n + tp - 1) / tp; };
  ModelSpec s = m;
  s.attention.heads = m.attention.heads / tp;
  if (m.attention.kind != AttentionKind::kMla) s.attention.kv_heads = static_cast<int>(split(m.attention.kv_heads));
  // Gated DeltaNet splits by heads like attention (vLLM's and SGLang's column-parallel in_proj).
  if (m.linear_attention.present()) {
    s.linear_attention.key_heads = static_cast<int>(split(m.linear_attention.key_heads));
    s.linear_attention.value_heads = static_cast<int>(split(m.linear_attention.value_heads));
  }
  s.dense_ffn = split(m.dense_ffn);
  s.shared_expert_ffn = split(m.shared_expert_ffn);
  return s;
}

double kv_cache_bytes_per_token_gpu(const ModelSpec& m, int tp) {
  return kv_cache_bytes_per_token(tensor_parallel_slice(m, tp));
}

}  // namespace moesim
