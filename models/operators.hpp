#pragma once
// Per-layer operator lists with FLOPs and bytes. Policies assemble these into tasks; cost models
// price them. Nothing here computes a time.
#include <cstdint>
#include <span>
#include <vector>

#include "models/model_spec.hpp"
#include "sim/work.hpp"

namespace moesim {

/// One sequence's part of a serving step: `new_tokens` query tokens that attend to the `context`
/// tokens already cached plus themselves (causally). Prefill of a whole prompt: {prompt, 0}; a
/// decode step: {1, tokens so far}; a chunk of chunked prefill: {chunk, prefilled so far}.
struct SeqChunk {
  std::int64_t new_tokens = 0;
  std::int64_t context = 0;
};

/// Most new tokens a chunk with cached context may have and still run MLA in the absorbed form
/// (vLLM's default decode threshold: one query token; speculative decoding would raise it).
inline constexpr std::int64_t kMlaAbsorbedMaxNewTokens = 1;

/// Which form MLA (DeepSeek-V2 §2.1.2) runs a chunk in; a pure function of the chunk. True: the
/// weight-absorbed form (W^UK folded into the query, W^UV into the output), attending in the
/// latent space over the cached latent, which is how decode kernels (FlashMLA, vLLM/SGLang MLA
/// decode) run: chosen when the chunk has cached context (context > 0) and at most
/// kMlaAbsorbedMaxNewTokens new tokens. False: the latent of the new tokens and of the cached
/// positions they attend is decompressed into per-head K and V (kv_b) and the core runs as
/// multi-head attention, as prefill does.
/// `max_new`: the most new tokens an absorbed chunk may have (a speculative decode step verifies
/// 1 + drafts tokens per sequence and runs them absorbed: vLLM raises its decode threshold to
/// 1 + num_speculative_tokens, FlashMLA takes several query tokens per sequence).
bool mla_absorbed(const SeqChunk& c, std::int64_t max_new = kMlaAbsorbedMaxNewTokens);

/// Attention of one serving step on one GPU over `seqs` (prefill chunks and decode tokens may be
/// mixed, as in chunked prefill): norm, projections over the step's new tokens, one fused
/// attention core (varlen flash-attention / paged decode attention) and the output projection,
/// residual add. Chunks with new_tokens <= 0 contribute nothing; no new tokens: no ops.
///
/// Core ("attn.core", kAttention): query token j of a chunk (position context + j) sees
/// min(context + j + 1, W) keys when causal (W = window, unbounded when 0), min(context + new, W)
/// when not (encoders); FLOPs = 2 · heads · pairs · (qk_dim + v_dim). HBM bytes, flash-attention
/// style (the score matrix stays on chip): Q read and O written for the new tokens, plus K and V
/// (kv_heads of them: GQA/MQA read fewer) of every position a sequence attends, once per
/// sequence — the cached positions read from the KV cache (at most W - 1 of them under a window)
/// and the new tokens' own K/V, counted once as they are written. Decode thus reads the whole
/// cache for one query token: memory-bound. m = most new tokens of a sequence, n = most keys one
/// query sees, k = qk_dim, batch = sequences · heads (shape only; cost models use flops/bytes).
///
/// MLA: chunks that are not absorbed (see mla_absorbed) go through kv_b (over their new tokens
/// and the cached positions they attend) and "attn.core"; absorbed chunks go through
/// "attn.q_absorb" (per-head q_nope · W^UK), "attn.core_latent" (MQA-like over the cached
/// latent of kv_lora_rank + qk_rope_head_dim per position, one copy shared by all heads) and
/// "attn.v_absorb" (per-head latent output · W^UV), before the shared "attn.out".
/// `window` overrides the model's attention window for this layer (-1: attention.window; 0: full
/// attention, e.g. a global layer of an interleaved model); `absorbed_max_new` as in mla_absorbed.
std::vector<Op> attention_step_ops(const ModelSpec& m, std::span<const SeqChunk> seqs, std::int64_t window = -1,
                                   std::int64_t absorbed_max_new = kMlaAbsorbedMaxNewTokens);

/// Gated DeltaNet (ModelSpec::linear_attention) over a step's chunks on one GPU: norm, the q/k/v/z
/// and beta/alpha projections, the causal convolution (with its per-sequence state), the chunked
/// gated delta rule ("lin.core": its state read and written once per sequence, whatever the
/// context), the gated norm and the output projection. Cost grows with new tokens, not context.
std::vector<Op> linear_attention_step_ops(const ModelSpec& m, std::span<const SeqChunk> seqs);
/// The attention of the model's non-full layers: Gated DeltaNet when the model has linear
/// attention, else its windowed attention (attention_step_ops with attention.window).
std::vector<Op> local_attention_step_ops(const ModelSpec& m, std::span<const SeqChunk> seqs,
                                         std::int64_t absorbed_max_new = kMlaAbsorbedMaxNewTokens);
/// The attention layer `layer` runs: linear, windowed or full, as ModelSpec says of that layer.
std::vector<Op> layer_attention_step_ops(const ModelSpec& m, int layer, std::span<const SeqChunk> seqs,
                                         std::int64_t absorbed_max_new = kMlaAbsorbedMaxNewTokens);

/// Prefill attention for `sequences` sequences of `seq_len` tokens on one GPU: the step
/// attention_step_ops(m, `sequences` copies of {seq_len, 0}); empty when either is <= 0.
std::vector<Op> attention_ops(const ModelSpec& m, std::int64_t sequences, std::int64_t seq_len);
/// Post-attention norm and router/gate GEMM with softmax/top-k over `tokens` tokens.
std::vector<Op> router_ops(const ModelSpec& m, std::int64_t tokens);
/// Routed experts on one GPU as one grouped GEMM per projection: `tokens_per_expert[i]` rows
/// for the i-th hosted expert (0 rows: the expert is skipped and its weights are not read).
std::vector<Op> expert_ops(const ModelSpec& m, std::vector<std::int64_t> tokens_per_expert);
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

/// One GPU's share of the model under `tp`-way tensor parallelism (Megatron-LM's split, as vLLM,
/// SGLang and TensorRT-LLM run it): 1/tp of the query heads; 1/tp of the KV heads, at least one
/// (a KV head is replicated where there are fewer KV heads than GPUs); dense and shared-expert
/// FFN widths split 1/tp (rounded up). MLA keeps its latent (replicated on every GPU of the
/// group, so its KV cache is not split). Routed experts are split by sharded_expert_ops.
/// Requires heads % tp == 0 (the scenario validator refuses other splits).
ModelSpec tensor_parallel_slice(const ModelSpec& m, int tp);
/// KV-cache bytes of one token over all layers on one GPU of a `tp`-way attention group.
double kv_cache_bytes_per_token_gpu(const ModelSpec& m, int tp);

/// Bytes of one token's hidden state on the wire (dispatch and combine).
double token_bytes(const ModelSpec& m);
/// KV-cache bytes per token per layer (MLA caches the compressed latent).
double kv_cache_bytes_per_token_layer(const ModelSpec& m);
/// KV-cache bytes of one token over the layers that cache keys (linear-attention layers keep a
/// state instead: linear_state_bytes_per_sequence).
double kv_cache_bytes_per_token(const ModelSpec& m);
/// Bytes of one sequence's linear-attention state (delta-rule matrices and convolution inputs)
/// over all linear-attention layers: constant in the context length. 0 without linear attention.
double linear_state_bytes_per_sequence(const ModelSpec& m);
/// The same on one GPU of a `tp`-way attention group (heads split as tensor_parallel_slice does).
double linear_state_bytes_per_sequence_gpu(const ModelSpec& m, int tp);

}  // namespace moesim
