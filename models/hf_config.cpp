// config.json → ModelSpec, field by field, per architecture. The field names and their meaning
// follow the Hugging Face transformers configuration classes (configuration_deepseek_v3.py,
// configuration_qwen3_moe.py, configuration_qwen2_moe.py, configuration_mixtral.py,
// configuration_llama4.py, configuration_gpt_oss.py, configuration_olmoe.py, configuration_llama.py,
// configuration_qwen3.py, MiniMax's configuration_minimax_m2.py, configuration_qwen3_next.py,
// configuration_qwen3_5_moe.py, configuration_deepseek_v32.py, configuration_glm_moe_dsa.py) and
// the model code that reads
// them (which layers are MoE, how wide the shared expert is).
#include "models/hf_config.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

namespace moesim {

namespace {

using nlohmann::json;

/// Reads fields of one JSON object, remembering which were used. The first problem is kept.
class FieldReader {
 public:
  FieldReader(const json& obj, std::string prefix) : obj_(obj), prefix_(std::move(prefix)) {}

  bool has(const std::string& key) {
    used_.insert(key);
    return obj_.contains(key) && !obj_.at(key).is_null();
  }
  std::int64_t need_int(const std::string& key) {
    if (!has(key)) return fail("needs the field '" + prefix_ + key + "'"), 0;
    return as_int(key);
  }
  std::int64_t opt_int(const std::string& key, std::int64_t fallback) { return has(key) ? as_int(key) : fallback; }
  bool opt_bool(const std::string& key, bool fallback) {
    if (!has(key)) return fallback;
    if (!obj_.at(key).is_boolean()) return fail("'" + prefix_ + key + "' must be true or false"), fallback;
    return obj_.at(key).get<bool>();
  }
  std::string opt_string(const std::string& key) {
    if (!has(key)) return {};
    if (!obj_.at(key).is_string()) return fail("'" + prefix_ + key + "' must be a string"), std::string();
    return obj_.at(key).get<std::string>();
  }
  const json* object(const std::string& key) {
    if (!has(key)) return nullptr;
    if (!obj_.at(key).is_object()) return fail("'" + prefix_ + key + "' must be an object"), nullptr;
    return &obj_.at(key);
  }
  const json* array(const std::string& key) {
    if (!has(key)) return nullptr;
    if (!obj_.at(key).is_array()) return fail("'" + prefix_ + key + "' must be a list"), nullptr;
    return &obj_.at(key);
  }
  void fail(const std::string& message) {
    if (error_.empty()) error_ = message;
  }
  const std::string& error() const { return error_; }
  void ignored(std::vector<std::string>& out) const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it)
      if (!used_.count(it.key())) out.push_back(prefix_ + it.key());
  }

 private:
  std::int64_t as_int(const std::string& key) {
    const json& v = obj_.at(key);
    // JSON integers up to 2^31 - 1: every count and width moesim reads fits, and a larger one is
    // a corrupt file, not a model.
    if (!v.is_number_integer()) return fail("'" + prefix_ + key + "' must be an integer"), 0;
    const auto n = v.get<std::int64_t>();
    if (n < 0 || n > 2147483647) return fail("'" + prefix_ + key + "' is out of range (0 .. 2147483647)"), 0;
    return n;
  }

  const json& obj_;
  std::string prefix_;
  std::set<std::string> used_;
  std::string error_;
};

int to_int(std::int64_t v) { return static_cast<int>(v); }

/// Fields every architecture shares: sizes, attention heads, vocabulary, context, dtype.
void read_common(FieldReader& f, ModelSpec& m) {
  m.hidden = f.need_int("hidden_size");
  m.layers = to_int(f.need_int("num_hidden_layers"));
  AttentionSpec& a = m.attention;
  a.heads = to_int(f.need_int("num_attention_heads"));
  a.kv_heads = to_int(f.opt_int("num_key_value_heads", a.heads));
  a.head_dim = to_int(f.opt_int("head_dim", a.heads > 0 ? m.hidden / a.heads : 0));
  a.kind = a.kv_heads == a.heads ? AttentionKind::kMha : a.kv_heads == 1 ? AttentionKind::kMqa : AttentionKind::kGqa;
  m.vocab = f.need_int("vocab_size");
  m.tied_embeddings = f.opt_bool("tie_word_embeddings", false);
  m.max_context = f.opt_int("max_position_embeddings", 0);
  // Every architecture here gates its FFNs (SiLU-GLU; GPT-OSS's clamped SwiGLU).
  const std::string act = f.opt_string("hidden_act");
  if (!act.empty() && act != "silu" && act != "swiglu") f.fail("'hidden_act' " + act + " is not a gated SiLU (silu)");
  m.activation = Activation::kSwiGlu;
}

/// compressed-tensors' pack-quantized INT4 weights (Kimi-K2 Thinking, Kimi-K2.5): one config group
/// of symmetric 4-bit integer weights in groups of 32, activations unquantised (W4A16), with
/// attention left out (`ignore` names self_attn): the routed experts in int4, weight-only. Other
/// widths, group sizes or quantised activations are refused, not priced as something else.
void read_compressed_tensors(FieldReader& qr, ModelSpec& m) {
  const json* groups = qr.object("config_groups");
  if (!groups || groups->size() != 1 || !groups->begin()->is_object())
    return qr.fail("'quantization_config.config_groups' must hold one group (INT4 weight-only experts)");
  const json& g = *groups->begin();
  const json w = g.value("weights", json());
  const bool int4 = w.is_object() && w.value("num_bits", 0) == 4 && w.value("type", std::string()) == "int" &&
                    w.value("strategy", std::string()) == "group" && w.value("group_size", 0) == 32 &&
                    w.value("symmetric", false);
  const bool weight_only = !g.contains("input_activations") || g.at("input_activations").is_null();
  if (!int4 || !weight_only)
    return qr.fail("compressed-tensors quantization other than symmetric INT4 weights in groups of 32 without "
                   "activation quantization is not modelled");
  bool attention_kept = false;
  if (const json* ignore = qr.array("ignore"))
    for (const json& v : *ignore)
      attention_kept = attention_kept || (v.is_string() && v.get<std::string>().find("self_attn") != std::string::npos);
  if (!attention_kept)
    return qr.fail("compressed-tensors INT4 that also quantises attention (no 'self_attn' in 'ignore') is not modelled");
  qr.has("format");
  qr.has("kv_cache_scheme");
  qr.has("quantization_status");
  m.expert_dtype = DType::kInt4;
  m.expert_weight_only = true;
}

/// torch_dtype (or transformers' newer `dtype`) sets the weights' type; quantization_config
/// overrides it for the tensors it quantises.
void read_dtype(FieldReader& top, FieldReader* inner, ModelSpec& m) {
  std::string t = top.opt_string("torch_dtype");
  if (t.empty()) t = top.opt_string("dtype");
  if (t.empty() && inner) t = inner->opt_string("torch_dtype");
  if (t.empty() && inner) t = inner->opt_string("dtype");
  if (t == "float16") m.dtype = DType::kFp16;
  else if (t == "float32") m.dtype = DType::kFp32;
  else if (t.empty() || t == "bfloat16") m.dtype = DType::kBf16;
  else top.fail("'torch_dtype' " + t + " is not bfloat16, float16 or float32");

  const json* q = top.object("quantization_config");
  if (!q) return;
  FieldReader qr(*q, "quantization_config.");
  const std::string method = qr.opt_string("quant_method");
  const std::string algo = qr.opt_string("quant_algo");
  if (method == "fp8") {
    // DeepSeek-V3/R1, Kimi-K2: block-wise FP8 (128x128 weight blocks, dynamic activation scales)
    // for every linear layer: the model runs W8A8.
    m.dtype = DType::kFp8;
    m.fp8_block_scales = q->contains("weight_block_size");
  } else if (method == "mxfp4") {
    // GPT-OSS: the experts' weights in MXFP4; attention, router, embeddings and LM head stay in
    // torch_dtype (modules_to_not_convert).
    m.expert_dtype = DType::kMxFp4;
  } else if (method == "modelopt" || algo == "NVFP4") {
    // NVIDIA ModelOpt NVFP4 checkpoints (nvidia/*-FP4): the experts in NVFP4.
    if (!algo.empty() && algo != "NVFP4" && algo != "FP8") qr.fail("'quantization_config.quant_algo' " + algo + " is not NVFP4 or FP8");
    if (algo == "FP8") m.dtype = DType::kFp8;
    else m.expert_dtype = DType::kNvFp4;
  } else if (method == "compressed-tensors") {
    read_compressed_tensors(qr, m);
  } else {
    top.fail("'quantization_config.quant_method' " + (method.empty() ? std::string("(missing)") : method) +
             " is not one moesim maps (fp8, mxfp4, modelopt NVFP4, compressed-tensors INT4)");
  }
  if (!qr.error().empty()) top.fail(qr.error());
}

void read_deepseek(FieldReader& f, ModelSpec& m) {
  m.experts = to_int(f.need_int("n_routed_experts"));
  m.top_k = to_int(f.need_int("num_experts_per_tok"));
  m.expert_ffn = f.need_int("moe_intermediate_size");
  m.dense_ffn = f.need_int("intermediate_size");
  // modeling_deepseek.py: the shared experts are one MLP of moe_intermediate_size x n_shared.
  m.shared_experts = to_int(f.opt_int("n_shared_experts", 0));
  m.shared_expert_ffn = m.shared_experts > 0 ? m.expert_ffn : 0;
  m.first_dense_layers = to_int(f.opt_int("first_k_dense_replace", 0));
  m.moe_every = to_int(std::max<std::int64_t>(1, f.opt_int("moe_layer_freq", 1)));
  m.mtp_layers = to_int(f.opt_int("num_nextn_predict_layers", 0));
  AttentionSpec& a = m.attention;
  a.kind = AttentionKind::kMla;
  a.q_lora_rank = to_int(f.opt_int("q_lora_rank", 0));
  a.kv_lora_rank = to_int(f.need_int("kv_lora_rank"));
  a.qk_nope_head_dim = to_int(f.need_int("qk_nope_head_dim"));
  a.qk_rope_head_dim = to_int(f.need_int("qk_rope_head_dim"));
  a.v_head_dim = to_int(f.need_int("v_head_dim"));
  a.head_dim = a.qk_nope_head_dim + a.qk_rope_head_dim;
  a.kv_heads = a.heads;
}

/// Qwen2-MoE / Qwen3-MoE: MoE in layer l when l is not in mlp_only_layers and
/// (l + 1) % decoder_sparse_step == 0.
void read_qwen_moe(FieldReader& f, ModelSpec& m, bool shared) {
  m.experts = to_int(f.need_int("num_experts"));
  m.top_k = to_int(f.need_int("num_experts_per_tok"));
  m.expert_ffn = f.need_int("moe_intermediate_size");
  m.dense_ffn = f.opt_int("intermediate_size", 0);
  const int step = to_int(std::max<std::int64_t>(1, f.opt_int("decoder_sparse_step", 1)));
  m.moe_every = step;
  m.moe_offset = step - 1;
  if (const json* only = f.array("mlp_only_layers")) {
    // A dense prefix is expressible (first_dense_layers); any other set of dense layers is not.
    std::vector<std::int64_t> l;
    for (const json& v : *only)
      if (v.is_number_integer()) l.push_back(v.get<std::int64_t>());
    std::sort(l.begin(), l.end());
    for (std::size_t i = 0; i < l.size(); ++i)
      if (l[i] != static_cast<std::int64_t>(i) || step != 1)
        return f.fail("'mlp_only_layers' other than a leading run of layers is not supported");
    m.first_dense_layers = static_cast<int>(l.size());
  }
  if (f.opt_bool("use_sliding_window", false)) m.attention.window = f.opt_int("sliding_window", 0);
  else f.has("sliding_window");
  f.has("max_window_layers");
  if (shared) {
    // Qwen2-MoE: one shared expert of shared_expert_intermediate_size (with its sigmoid gate).
    m.shared_expert_ffn = f.need_int("shared_expert_intermediate_size");
    m.shared_experts = m.shared_expert_ffn > 0 ? 1 : 0;
  }
}

void read_mixtral(FieldReader& f, ModelSpec& m) {
  m.experts = to_int(f.need_int("num_local_experts"));
  m.top_k = to_int(f.need_int("num_experts_per_tok"));
  m.expert_ffn = f.need_int("intermediate_size");
  m.attention.window = f.opt_int("sliding_window", 0);
}

void read_olmoe(FieldReader& f, ModelSpec& m) {
  m.experts = to_int(f.need_int("num_experts"));
  m.top_k = to_int(f.need_int("num_experts_per_tok"));
  m.expert_ffn = f.need_int("intermediate_size");
}

/// Llama 4 text model (modeling_llama4.py): MoE in layer l when (l + 1) % interleave_moe_layer_step
/// == 0, each with one shared expert of the routed experts' width; the other layers are dense of
/// intermediate_size_mlp. Chunked attention (attention_chunk_size) in the RoPE layers, global
/// attention in the NoPE layers: every fourth, transformers' default no_rope_layers pattern.
void read_llama4(FieldReader& f, ModelSpec& m) {
  m.experts = to_int(f.need_int("num_local_experts"));
  m.top_k = to_int(f.need_int("num_experts_per_tok"));
  m.expert_ffn = f.need_int("intermediate_size");
  m.shared_experts = 1;
  m.shared_expert_ffn = m.expert_ffn;
  m.dense_ffn = f.opt_int("intermediate_size_mlp", 0);
  const int step = to_int(std::max<std::int64_t>(1, f.opt_int("interleave_moe_layer_step", 1)));
  m.moe_every = step;
  m.moe_offset = step - 1;
  m.attention.window = f.opt_int("attention_chunk_size", 0);
  if (m.attention.window > 0) m.full_attention_every = 4;
  if (const json* nope = f.array("no_rope_layers"); nope && !nope->empty()) {
    // 1 = RoPE (chunked), 0 = NoPE (global): must be the every-fourth pattern moesim prices.
    for (std::size_t l = 0; l < nope->size(); ++l) {
      const json& v = (*nope)[l];
      const bool global = v.is_number_integer() && v.get<std::int64_t>() == 0;
      if (global != (l % 4 == 3)) return f.fail("'no_rope_layers' other than every fourth layer global is not supported");
    }
  }
}

/// GPT-OSS (modeling_gpt_oss.py): every layer MoE (no shared expert), attention alternating as
/// layer_types lists (sliding window, full); attention sinks and biases are not priced (a scalar
/// per head, and vectors: negligible next to the projections).
void read_gpt_oss(FieldReader& f, ModelSpec& m) {
  m.experts = to_int(f.need_int("num_local_experts"));
  m.top_k = to_int(f.has("num_experts_per_tok") ? f.need_int("num_experts_per_tok") : f.need_int("experts_per_token"));
  f.has("experts_per_token");
  m.expert_ffn = f.need_int("intermediate_size");
  m.attention.window = f.opt_int("sliding_window", 0);
  const json* types = f.array("layer_types");
  if (!types || m.attention.window <= 0) return;
  // The period n with layer l full exactly when l % n == n - 1.
  std::vector<bool> full;
  for (const json& v : *types) full.push_back(v.is_string() && v.get<std::string>() == "full_attention");
  for (int n = 1; n <= static_cast<int>(full.size()); ++n) {
    bool match = true;
    for (std::size_t l = 0; l < full.size() && match; ++l) match = full[l] == (static_cast<int>(l) % n == n - 1);
    if (match) {
      m.full_attention_every = n;
      return;
    }
  }
  f.fail("'layer_types' is not a periodic pattern of sliding layers ending in one full-attention layer");
}

/// Dense decoders (modeling_llama.py, modeling_qwen3.py): every layer has one FFN of
/// intermediate_size and there are no experts (experts 0: no layer is MoE). Qwen3's per-head q/k
/// norms are vectors, not counted; a sliding window only where use_sliding_window says so.
void read_dense(FieldReader& f, ModelSpec& m) {
  m.dense_ffn = f.need_int("intermediate_size");
  m.experts = 0;
  m.top_k = 0;
  m.expert_ffn = 0;
  if (f.opt_bool("use_sliding_window", false)) m.attention.window = f.opt_int("sliding_window", 0);
  else f.has("sliding_window");
  f.has("max_window_layers");
}

/// MiniMax-M2 / M2.5 (modeling_minimax_m2.py): MoE in every layer, num_local_experts experts of
/// intermediate_size, num_experts_per_tok of them per token (sigmoid scores with a routing bias,
/// as DeepSeek-V3 routes), a shared expert only when shared_intermediate_size > 0; full GQA
/// attention in every layer (QK norms are vectors and partial RoPE costs nothing: not priced);
/// num_mtp_modules multi-token-prediction modules when use_mtp. MiniMax-01's lightning (linear)
/// attention layers (attn_type_list entries 0) are not this architecture and are refused.
void read_minimax_m2(FieldReader& f, ModelSpec& m) {
  m.experts = to_int(f.need_int("num_local_experts"));
  m.top_k = to_int(f.need_int("num_experts_per_tok"));
  m.expert_ffn = f.need_int("intermediate_size");
  m.shared_expert_ffn = f.opt_int("shared_intermediate_size", 0);
  m.shared_experts = m.shared_expert_ffn > 0 ? 1 : 0;
  if (f.opt_bool("use_mtp", false)) m.mtp_layers = to_int(f.opt_int("num_mtp_modules", 0));
  else f.has("num_mtp_modules");
  f.has("mtp_transformer_layers");
  if (const json* types = f.array("attn_type_list"))
    for (const json& v : *types)
      if (!v.is_number_integer() || v.get<std::int64_t>() != 1)
        return f.fail("'attn_type_list' with linear-attention layers (entries other than 1) is not supported");
}

/// Qwen3-Next / Qwen3.5-MoE (modeling_qwen3_next.py, modeling_qwen3_5_moe.py): Qwen2-MoE's experts
/// with one gated shared expert, every layer MoE, and hybrid attention: layer_types (or, without
/// it, every full_attention_interval-th layer) full gated attention (attn_output_gate), the others
/// Gated DeltaNet of linear_num_key_heads / linear_num_value_heads heads. The recurrent state's
/// type is mamba_ssm_dtype (float32 when absent, as the engines keep it).
void read_qwen_next(FieldReader& f, ModelSpec& m) {
  read_qwen_moe(f, m, true);
  LinearAttentionSpec& l = m.linear_attention;
  l.key_heads = to_int(f.need_int("linear_num_key_heads"));
  l.value_heads = to_int(f.need_int("linear_num_value_heads"));
  l.key_head_dim = to_int(f.need_int("linear_key_head_dim"));
  l.value_head_dim = to_int(f.need_int("linear_value_head_dim"));
  l.conv_kernel = to_int(f.need_int("linear_conv_kernel_dim"));
  const std::string state = f.opt_string("mamba_ssm_dtype");
  if (state == "bfloat16") l.state_dtype = DType::kBf16;
  else if (state == "float16") l.state_dtype = DType::kFp16;
  else if (state.empty() || state == "float32") l.state_dtype = DType::kFp32;
  else f.fail("'mamba_ssm_dtype' " + state + " is not float32, bfloat16 or float16");
  m.attention.output_gate = f.opt_bool("attn_output_gate", true);
  m.mtp_layers = to_int(f.opt_int("mtp_num_hidden_layers", 0));
  f.has("mtp_use_dedicated_embeddings");
  const int interval = to_int(f.opt_int("full_attention_interval", 4));
  if (interval < 1) return f.fail("'full_attention_interval' must be >= 1");
  m.full_attention_every = interval;
  if (const json* types = f.array("layer_types")) {
    // Must be the every-interval-th-layer-full pattern moesim prices.
    if (static_cast<int>(types->size()) != m.layers)
      return f.fail("'layer_types' lists " + std::to_string(types->size()) + " layers, not num_hidden_layers");
    for (std::size_t l = 0; l < types->size(); ++l) {
      const json& v = (*types)[l];
      const std::string t = v.is_string() ? v.get<std::string>() : std::string();
      if (t != "full_attention" && t != "linear_attention")
        return f.fail("'layer_types' entries must be full_attention or linear_attention");
      if ((t == "full_attention") != (static_cast<int>(l) % interval == interval - 1))
        return f.fail("'layer_types' other than every full_attention_interval-th layer full is not supported");
    }
  }
}

/// DeepSeek-V3.2 and GLM-5 (GlmMoeDsa): DeepSeek-V3's MLA and MoE plus DeepSeek Sparse Attention
/// (§2.1): an indexer of index_n_heads heads of index_head_dim picks index_topk keys per query.
void read_deepseek_sparse(FieldReader& f, ModelSpec& m) {
  read_deepseek(f, m);
  AttentionSpec& a = m.attention;
  a.index_heads = to_int(f.need_int("index_n_heads"));
  a.index_head_dim = to_int(f.need_int("index_head_dim"));
  a.index_topk = f.need_int("index_topk");
  // GLM-5 also states head_dim (its rope dims) and qk_head_dim (nope + rope), both implied.
  f.has("qk_head_dim");
}

using ArchReader = void (*)(FieldReader&, ModelSpec&);

const std::map<std::string, ArchReader>& readers() {
  static const std::map<std::string, ArchReader> r = {
      {"DeepseekV3ForCausalLM", read_deepseek},
      {"DeepseekV2ForCausalLM", read_deepseek},
      {"Qwen3MoeForCausalLM", [](FieldReader& f, ModelSpec& m) { read_qwen_moe(f, m, false); }},
      {"Qwen2MoeForCausalLM", [](FieldReader& f, ModelSpec& m) { read_qwen_moe(f, m, true); }},
      {"MixtralForCausalLM", read_mixtral},
      {"Llama4ForConditionalGeneration", read_llama4},
      {"Llama4ForCausalLM", read_llama4},
      {"GptOssForCausalLM", read_gpt_oss},
      {"OlmoeForCausalLM", read_olmoe},
      {"LlamaForCausalLM", read_dense},
      {"Qwen3ForCausalLM", read_dense},
      {"MiniMaxM2ForCausalLM", read_minimax_m2},
      {"Qwen3NextForCausalLM", read_qwen_next},
      {"Qwen3_5MoeForConditionalGeneration", read_qwen_next},
      {"Qwen3_5MoeForCausalLM", read_qwen_next},
      {"DeepseekV32ForCausalLM", read_deepseek_sparse},
      {"GlmMoeDsaForCausalLM", read_deepseek_sparse},
  };
  return r;
}

}  // namespace

const std::vector<std::string>& hf_architectures() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& [name, reader] : readers()) n.push_back(name);
    return n;
  }();
  return names;
}

HfConfigRead model_from_hf_config(const json& config, const std::string& name) {
  HfConfigRead out;
  if (!config.is_object()) {
    out.error = "a config.json must be a JSON object";
    return out;
  }
  FieldReader top(config, "");
  const json* archs = top.array("architectures");
  std::string arch;
  if (archs && !archs->empty() && (*archs)[0].is_string()) arch = (*archs)[0].get<std::string>();
  const auto reader = readers().find(arch);
  if (reader == readers().end()) {
    std::string known;
    for (const auto& n : hf_architectures()) known += (known.empty() ? "" : ", ") + n;
    out.error = arch.empty() ? "needs the field 'architectures' (a list naming the model class)"
                             : "architecture " + arch + " is not one moesim reads (known: " + known + ")";
    return out;
  }
  ModelSpec& m = out.model;
  m.name = name;
  // Llama 4's and Qwen3.5's text models sit under text_config (vision towers are not simulated).
  const bool multimodal = arch == "Llama4ForConditionalGeneration" || arch == "Qwen3_5MoeForConditionalGeneration";
  const json* text = multimodal ? top.object("text_config") : nullptr;
  if (multimodal && !text && top.error().empty()) top.fail("needs the field 'text_config'");
  FieldReader inner(text ? *text : config, "text_config.");
  FieldReader& f = text ? inner : top;
  if (top.error().empty()) {
    read_common(f, m);
    reader->second(f, m);
    read_dtype(top, text ? &inner : nullptr, m);
  }
  top.has("model_type");
  inner.has("model_type");
  out.error = !top.error().empty() ? top.error() : text ? inner.error() : std::string();
  top.ignored(out.ignored);
  if (text) inner.ignored(out.ignored);
  // A dense architecture has no experts; an MoE one must have some, and pick at least one.
  const bool dense = reader->second == read_dense;
  if (out.ok() && (m.hidden <= 0 || m.layers <= 0 || m.attention.heads <= 0 || (!dense && (m.experts <= 0 || m.top_k <= 0))))
    out.error = dense ? "hidden_size, num_hidden_layers and num_attention_heads must be > 0"
                      : "hidden_size, num_hidden_layers, the expert count, experts per token and num_attention_heads must be > 0";
  return out;
}

}  // namespace moesim
