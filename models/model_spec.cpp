// Names, layer layout and parameter counts of a ModelSpec. Counts follow the Hugging Face
// implementations (weights only; biases ignored, norms counted) so that presets reproduce the
// totals their model cards publish (checked in tests/models/test_model_spec.cpp).
#include "models/model_spec.hpp"

namespace moesim {

const char* attention_kind_name(AttentionKind k) {
  switch (k) {
    case AttentionKind::kMha: return "mha";
    case AttentionKind::kGqa: return "gqa";
    case AttentionKind::kMqa: return "mqa";
    case AttentionKind::kMla: return "mla";
  }
  return "?";
}

bool parse_attention_kind(const std::string& s, AttentionKind& out) {
  if (s == "mha") out = AttentionKind::kMha;
  else if (s == "gqa") out = AttentionKind::kGqa;
  else if (s == "mqa") out = AttentionKind::kMqa;
  else if (s == "mla") out = AttentionKind::kMla;
  else return false;
  return true;
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::kRelu: return "relu";
    case Activation::kGelu: return "gelu";
    case Activation::kSwiGlu: return "swiglu";
  }
  return "?";
}

bool parse_activation(const std::string& s, Activation& out) {
  if (s == "relu") out = Activation::kRelu;
  else if (s == "gelu") out = Activation::kGelu;
  else if (s == "swiglu") out = Activation::kSwiGlu;
  else return false;
  return true;
}

bool ModelSpec::is_moe_layer(int layer) const {
  if (experts <= 0 || layer < 0 || layer >= layers || layer < first_dense_layers) return false;
  const int every = moe_every > 0 ? moe_every : 1;
  return (layer - first_dense_layers) % every == moe_offset;
}

std::int64_t ModelSpec::window_of_layer(int layer) const {
  if (attention.window <= 0) return 0;
  const int n = full_attention_every;
  return n > 0 && layer % n == n - 1 ? 0 : attention.window;
}

bool ModelSpec::is_linear_attention_layer(int layer) const {
  if (!linear_attention.present() || layer < 0 || layer >= layers) return false;
  const int n = full_attention_every;
  return !(n > 0 && layer % n == n - 1);
}

int ModelSpec::num_kv_cache_layers() const {
  int n = 0;
  for (int l = 0; l < layers; ++l) n += is_linear_attention_layer(l) ? 0 : 1;
  return n;
}

bool ModelSpec::interleaves_attention() const {
  if (linear_attention.present()) return num_kv_cache_layers() > 0 && num_kv_cache_layers() < layers;
  return attention.window > 0 && full_attention_every > 0;
}

int ModelSpec::num_moe_layers() const {
  int n = 0;
  for (int l = 0; l < layers; ++l) n += is_moe_layer(l) ? 1 : 0;
  return n;
}

namespace {

// An FFN of width `ffn`: SwiGLU has gate, up and down projections; ReLU/GELU only up and down.
double ffn_params(std::int64_t hidden, std::int64_t ffn, Activation a) {
  const double mats = a == Activation::kSwiGlu ? 3.0 : 2.0;
  return mats * static_cast<double>(hidden) * static_cast<double>(ffn);
}

}  // namespace

double ModelSpec::expert_params() const { return ffn_params(hidden, expert_ffn, activation); }
double ModelSpec::shared_expert_params() const { return ffn_params(hidden, shared_expert_ffn, activation); }
double ModelSpec::dense_ffn_params() const { return ffn_params(hidden, dense_ffn, activation); }

double ModelSpec::attention_params() const {
  const AttentionSpec& a = attention;
  const double h = static_cast<double>(hidden);
  const double heads = a.heads;
  // Two per-layer norms (before attention and before the FFN/MoE block), one weight each.
  double norms = 2.0 * h;
  double proj = 0.0;
  if (a.kind == AttentionKind::kMla) {
    // DeepSeek-V2 §2.1 (modeling_deepseek.py): queries through an optional low-rank q_a/q_b,
    // keys/values compressed to kv_lora_rank (plus the shared rope key) and expanded by kv_b.
    const double qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    const double q = a.q_lora_rank > 0 ? h * a.q_lora_rank + static_cast<double>(a.q_lora_rank) * heads * qk
                                       : h * heads * qk;
    const double kv_a = h * (a.kv_lora_rank + a.qk_rope_head_dim);
    const double kv_b = static_cast<double>(a.kv_lora_rank) * heads * (a.qk_nope_head_dim + a.v_head_dim);
    const double o = heads * a.v_head_dim * h;
    proj = q + kv_a + kv_b + o;
    norms += a.kv_lora_rank + (a.q_lora_rank > 0 ? a.q_lora_rank : 0);
    if (a.sparse()) {
      // DeepSeek-V3.2's indexer: its queries from the q latent (wq_b), one shared key (wk, with
      // a LayerNorm) and per-head weights (weights_proj), all per layer.
      const double q_in = a.q_lora_rank > 0 ? a.q_lora_rank : h;
      proj += q_in * a.index_heads * a.index_head_dim + h * a.index_head_dim + h * a.index_heads;
      norms += 2.0 * a.index_head_dim;
    }
  } else {
    const double hd = a.head_dim;
    // A gated attention's query projection also produces the gate (heads · head_dim more).
    const double q = h * heads * hd * (a.output_gate ? 2.0 : 1.0);
    proj = q + 2.0 * h * a.kv_heads * hd + heads * hd * h;
  }
  return proj + norms;
}

double ModelSpec::linear_attention_params() const {
  const LinearAttentionSpec& l = linear_attention;
  if (!l.present()) return 0.0;
  const double h = static_cast<double>(hidden);
  const double v = static_cast<double>(l.value_heads) * l.value_head_dim;
  // modeling_qwen3_next.py's Qwen3NextGatedDeltaNet: in_proj_qkvz (q, k, v and the gate z),
  // in_proj_ba (per-head beta and alpha), the depthwise conv1d over q/k/v, A_log and dt_bias per
  // value head, the gated RMSNorm over value_head_dim and out_proj; plus the layer's two norms.
  const double in = h * (static_cast<double>(l.conv_channels()) + v) + h * 2.0 * l.value_heads;
  const double conv = static_cast<double>(l.conv_channels()) * l.conv_kernel;
  return in + conv + 2.0 * l.value_heads + l.value_head_dim + v * h + 2.0 * h;
}

double ModelSpec::non_expert_params() const {
  const double moe = num_moe_layers();
  const double dense = layers - moe;
  const double router = static_cast<double>(hidden) * experts;
  const double embeddings = (tied_embeddings ? 1.0 : 2.0) * static_cast<double>(vocab) * static_cast<double>(hidden);
  const double final_norm = static_cast<double>(hidden);
  const int linear = layers - num_kv_cache_layers();
  return (layers - linear) * attention_params() + linear * linear_attention_params() + moe * (router + shared_experts * shared_expert_params()) +
         dense * dense_ffn_params() + embeddings + final_norm;
}

double ModelSpec::total_params() const { return non_expert_params() + num_moe_layers() * experts * expert_params(); }

double ModelSpec::active_params() const {
  return non_expert_params() + num_moe_layers() * static_cast<double>(top_k) * expert_params();
}

}  // namespace moesim
