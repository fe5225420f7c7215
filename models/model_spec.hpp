#pragma once
// MoE model architectures. Presets carry the published configuration numbers (see model_presets.cpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/registry.hpp"
#include "sim/work.hpp"

namespace moesim {

enum class AttentionKind { kMha, kGqa, kMqa, kMla };
const char* attention_kind_name(AttentionKind k);
bool parse_attention_kind(const std::string& s, AttentionKind& out);

enum class Activation { kRelu, kGelu, kSwiGlu };
const char* activation_name(Activation a);
bool parse_activation(const std::string& s, Activation& out);

/// Attention block shape. `window` > 0 means sliding-window attention over that many tokens.
struct AttentionSpec {
  AttentionKind kind = AttentionKind::kMha;
  int heads = 0;
  int kv_heads = 0;       ///< == heads for MHA, 1 for MQA
  int head_dim = 0;
  std::int64_t window = 0;
  bool causal = true;     ///< false for encoders (Switch/T5 encoder)
  // Multi-head latent attention (DeepSeek-V2/V3); used when kind == kMla.
  int q_lora_rank = 0;    ///< 0: queries projected directly from hidden
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
};

/// A Mixture-of-Experts transformer. Dense layers use `dense_ffn`; MoE layers have `experts`
/// routed experts of width `expert_ffn`, `top_k` of them per token, plus `shared_experts`
/// always-on experts of width `shared_expert_ffn`.
struct ModelSpec {
  std::string name;
  int layers = 0;
  // Which layers are MoE: layer l is MoE when l >= first_dense_layers and
  // (l - first_dense_layers) % moe_every == moe_offset.
  int first_dense_layers = 0;
  int moe_every = 1;
  int moe_offset = 0;
  std::int64_t hidden = 0;
  std::int64_t expert_ffn = 0;
  std::int64_t dense_ffn = 0;
  int experts = 0;
  int top_k = 1;
  int shared_experts = 0;
  std::int64_t shared_expert_ffn = 0;
  Activation activation = Activation::kSwiGlu;
  AttentionSpec attention;
  DType dtype = DType::kBf16;
  /// KV-cache element type when it differs from the weights' (e.g. fp8 KV with bf16 weights, or
  /// TensorRT-LLM's FP8 recipes: fp8 weights and fp8 KV); empty: the weights' dtype.
  std::optional<DType> kv_dtype;
  DType kv_cache_dtype() const { return kv_dtype.value_or(dtype); }
  std::int64_t vocab = 0;
  /// One embedding matrix instead of input + output (tied weights, or an encoder without an LM head).
  bool tied_embeddings = false;
  /// Longest sequence (prompt + output tokens) the model accepts: the config's
  /// max_position_embeddings. 0 = unknown (not checked).
  std::int64_t max_context = 0;

  bool is_moe_layer(int layer) const;
  int num_moe_layers() const;
  /// Parameters of one routed expert (gate/up/down as the activation needs).
  double expert_params() const;
  double expert_bytes() const { return expert_params() * dtype_bytes(dtype); }
  /// Parameters of one layer's attention block (projections; norms are negligible but counted).
  double attention_params() const;
  /// Parameters of everything except routed experts: attention, router, shared experts, dense
  /// FFNs and embeddings. Replicated on every GPU under attention data parallelism.
  double non_expert_params() const;
  double total_params() const;
  /// Parameters one token touches: everything but the routed experts, plus top_k of them per
  /// MoE layer (the "A2.7B" / "37B activated" figures model cards quote).
  double active_params() const;
  /// Parameters of one shared expert and of one dense-layer FFN.
  double shared_expert_params() const;
  double dense_ffn_params() const;
};

/// Registry of model presets ("switch-base-128", "mixtral-8x7b", ...).
Registry<ModelSpec>& model_presets();

}  // namespace moesim
