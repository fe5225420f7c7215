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
  /// Gated attention (Qwen3-Next / Qwen3.5 full-attention layers, attn_output_gate): the query
  /// projection also produces a per-channel gate, sigmoid(gate) multiplies the attention output.
  bool output_gate = false;
  // DeepSeek Sparse Attention (DeepSeek-V3.2 §2.1; GLM-5): a lightning indexer of `index_heads`
  // heads of `index_head_dim` scores every cached key per query token in FP8, and the MLA core
  // (in its absorbed, MQA form) attends only the `index_topk` keys it picks. 0: dense attention.
  int index_heads = 0;
  int index_head_dim = 0;
  std::int64_t index_topk = 0;
  bool sparse() const { return index_topk > 0; }
};

/// Gated DeltaNet linear attention (Yang et al. 2025; Qwen3-Next and Qwen3.5's `linear_attention`
/// layers): per value head a state matrix of key_head_dim x value_head_dim updated by the gated
/// delta rule each token, a short causal convolution over q/k/v, and an output gated by z. The
/// state does not grow with the context: a sequence holds a fixed state per layer, no KV cache.
struct LinearAttentionSpec {
  int key_heads = 0;    ///< 0: the model has no linear-attention layers
  int value_heads = 0;
  int key_head_dim = 0;
  int value_head_dim = 0;
  int conv_kernel = 0;  ///< causal depthwise convolution width (its state keeps conv_kernel - 1 tokens)
  /// Element type of the recurrent state (Qwen3.5's mamba_ssm_dtype: float32).
  DType state_dtype = DType::kFp32;
  bool present() const { return value_heads > 0; }
  /// Channels of the causal convolution: q and k (key_heads · key_head_dim each) and v.
  std::int64_t conv_channels() const {
    return 2LL * key_heads * key_head_dim + static_cast<std::int64_t>(value_heads) * value_head_dim;
  }
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
  /// FP8 GEMMs with 128-block weight scales (DeepSeek-style checkpoints: quantization_config
  /// fp8 with weight_block_size), which run DeepGEMM-class kernels, not per-tensor FP8 ones.
  bool fp8_block_scales = false;
  DType kv_cache_dtype() const { return kv_dtype.value_or(dtype); }
  /// Routed experts' weight type when it differs from `dtype` (NVFP4 experts of
  /// nvidia/DeepSeek-R1-FP4, GPT-OSS's MXFP4 experts); empty: `dtype`.
  std::optional<DType> expert_dtype;
  /// True: the experts' quantised weights are dequantised inside the kernel and the math runs in
  /// `dtype` (weight-only, W4A16 / W8A16); false: activations are quantised too and the math runs
  /// at the expert type's tensor-core peak (W4A4, W8A8).
  bool expert_weight_only = false;
  DType expert_weight_dtype() const { return expert_dtype.value_or(dtype); }
  DType expert_compute_dtype() const { return expert_weight_only ? dtype : expert_weight_dtype(); }
  std::int64_t vocab = 0;
  /// One embedding matrix instead of input + output (tied weights, or an encoder without an LM head).
  bool tied_embeddings = false;
  /// Longest sequence (prompt + output tokens) the model accepts: the config's
  /// max_position_embeddings. 0 = unknown (not checked).
  std::int64_t max_context = 0;
  /// Interleaved local and global attention: with attention.window > 0, every n-th layer (layer l
  /// with l % n == n - 1) attends the whole context and the others through the window. GPT-OSS
  /// alternates sliding (window 128) and full layers (n = 2); Llama 4 runs chunked attention in
  /// three layers of four and global attention in the fourth (n = 4; a chunk of C tokens is
  /// priced as a window of C, which bounds it from above). 0: every layer uses the window.
  int full_attention_every = 0;
  /// Hybrid linear attention (Qwen3.5): with linear_attention.present(), layer l attends the
  /// whole context when full_attention_every = n > 0 and l % n == n - 1 (Qwen3.5's
  /// full_attention_interval 4), and runs Gated DeltaNet otherwise.
  LinearAttentionSpec linear_attention;
  /// Multi-token-prediction modules shipped with the model (DeepSeek-V3's
  /// num_nextn_predict_layers): not part of the layers above nor of the parameter counts; the
  /// serving engine runs them as drafts when serving.speculative.method is mtp.
  int mtp_layers = 0;

  /// The attention window of layer `layer` (0: full attention).
  std::int64_t window_of_layer(int layer) const;
  /// Whether layer `layer` runs linear attention (a fixed state, no KV cache).
  bool is_linear_attention_layer(int layer) const;
  /// Layers that keep a KV cache (all but the linear-attention ones).
  int num_kv_cache_layers() const;
  /// Whether some layers attend differently from the others (windowed or linear beside full):
  /// the serving step builds both forms of attention.
  bool interleaves_attention() const;
  /// Parameters of one linear-attention layer's block (projections, convolution, gates, norms).
  double linear_attention_params() const;
  bool is_moe_layer(int layer) const;
  int num_moe_layers() const;
  /// Parameters of one routed expert (gate/up/down as the activation needs).
  double expert_params() const;
  double expert_bytes() const { return expert_params() * dtype_bytes(expert_weight_dtype()); }
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
