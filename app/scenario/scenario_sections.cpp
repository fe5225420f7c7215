#include "app/scenario/scenario_sections.hpp"

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "app/scenario/scenario_keys.hpp"
#include "core/json_input.hpp"
#include "hardware/builtin_calibration.hpp"
#include "hardware/cost_model.hpp"
#include "models/hf_config.hpp"
#include "sim/network_backend.hpp"

namespace moesim {
namespace {

std::string num(double v) {
  std::ostringstream os;
  os.precision(12);
  os << v;
  return os.str();
}

ParamSpec int_field(const std::string& name, double def, bool has_def, const std::string& unit,
                    const std::string& help, double min = 0.0, std::optional<double> max = {}) {
  return ParamSpec{name, ParamType::kInt, has_def ? num(def) : "", unit, help, min, max, {}};
}
ParamSpec float_field(const std::string& name, double def, const std::string& unit, const std::string& help,
                      double min = 0.0, std::optional<double> max = {}) {
  return ParamSpec{name, ParamType::kFloat, num(def), unit, help, min, max, {}};
}

// Physical ranges of hardware parameters: wide enough for any machine, past or planned, narrow
// enough that every duration stays within simulated time's range (sim/tick.hpp).
constexpr double kMaxTflops = 1e5;          // 100 PFLOP/s per GPU
constexpr double kMinGBps = 1e-3, kMaxGBps = 1e6;  // 1 MB/s .. 1 PB/s
constexpr double kMaxLatencyUs = 1e6;       // one second per hop or launch
// Physical ranges of model dimensions: past every model published or planned, short of counts
// whose simulation would be unbounded work (a model of 10^7 layers) or overflow a 32-bit product.
constexpr double kMaxLayers = 4096;         // transformer layers (the largest models have ~200)
constexpr double kMaxWidth = 65536;         // hidden size, heads, head and latent dimensions
constexpr double kMaxFfn = 1048576;         // an FFN's intermediate size
constexpr double kMaxExperts = 65536;       // routed experts per layer (the finest-grained have ~1,000)
constexpr double kMaxTopK = 1024;           // experts selected per token, shared experts
constexpr double kMaxVocab = 16777216;      // vocabulary (the largest have ~260k)
constexpr double kMaxContext = 1e9;         // tokens of context or window
ParamSpec choice_field(const std::string& name, const std::string& def, const std::string& help,
                       std::vector<std::string> choices) {
  return ParamSpec{name, ParamType::kString, def, "", help, {}, {}, std::move(choices)};
}
std::vector<std::string> with_auto(std::vector<std::string> names) {
  names.insert(names.begin(), "auto");
  return names;
}

// Reads the `preset:` key (if any) of a mapping against a registry.
template <typename T>
const T* preset_of(const YAML::Node& node, const Registry<T>& reg, const SourceMap& src, Diagnostics& diags,
                   std::string& name) {
  YAML::Node p = node.IsScalar() ? node : (node.IsMap() ? node["preset"] : YAML::Node());
  if (!p) return nullptr;
  if (!p.IsScalar()) {
    diags.error(src.locate(p), "'preset' must be a name");
    return nullptr;
  }
  name = p.Scalar();
  if (const auto* e = reg.find(name)) return &e->value;
  diags.error(src.locate(p), unknown_name_message(reg.family(), name, reg.names()));
  return nullptr;
}

}  // namespace

std::vector<ParamSpec> attention_specs(const AttentionSpec* b) {
  const bool d = b != nullptr;
  AttentionSpec z;
  const AttentionSpec& a = d ? *b : z;
  return {
      choice_field("kind", d ? attention_kind_name(a.kind) : "mha", "attention kind", {"mha", "gqa", "mqa", "mla"}),
      int_field("heads", a.heads, d, "", "query heads", 1, kMaxWidth),
      int_field("kv_heads", a.kv_heads, d, "", "key/value heads (= heads for MHA, 1 for MQA)", 1, kMaxWidth),
      int_field("head_dim", a.head_dim, d, "", "dimension per head", 1, kMaxWidth),
      int_field("window", static_cast<double>(a.window), true, "tokens", "sliding window (0 = full attention)", 0, kMaxContext),
      ParamSpec{"causal", ParamType::kBool, a.causal ? "true" : "false", "", "causal mask (false for encoders)", {}, {}, {}},
      int_field("q_lora_rank", a.q_lora_rank, true, "", "MLA query compression rank (0 = none)", 0, kMaxWidth),
      int_field("kv_lora_rank", a.kv_lora_rank, true, "", "MLA key/value latent rank", 0, kMaxWidth),
      int_field("qk_nope_head_dim", a.qk_nope_head_dim, true, "", "MLA non-rotary query/key head dim", 0, kMaxWidth),
      int_field("qk_rope_head_dim", a.qk_rope_head_dim, true, "", "MLA rotary query/key head dim", 0, kMaxWidth),
      int_field("v_head_dim", a.v_head_dim, true, "", "MLA value head dim", 0, kMaxWidth),
      ParamSpec{"output_gate", ParamType::kBool, a.output_gate ? "true" : "false", "",
                "gated attention (Qwen3.5 attn_output_gate): the query projection also yields a sigmoid gate on "
                "the attention output", {}, {}, {}},
      int_field("index_heads", a.index_heads, true, "",
                "DeepSeek Sparse Attention (kind mla): lightning-indexer heads (0 = dense attention)", 0, kMaxWidth),
      int_field("index_head_dim", a.index_head_dim, true, "", "DeepSeek Sparse Attention: indexer head dim", 0, kMaxWidth),
      int_field("index_topk", static_cast<double>(a.index_topk), true, "tokens",
                "DeepSeek Sparse Attention: keys each query attends (0 = dense attention)", 0, kMaxContext),
  };
}

std::vector<ParamSpec> model_field_specs(const ModelSpec* b) {
  const bool d = b != nullptr;
  ModelSpec z;
  const ModelSpec& m = d ? *b : z;
  return {
      int_field("layers", m.layers, d, "", "transformer layers", 1, kMaxLayers),
      int_field("first_dense_layers", m.first_dense_layers, true, "", "leading layers with a dense FFN", 0, kMaxLayers),
      int_field("moe_every", m.moe_every, true, "", "after the dense prefix, every n-th layer is MoE", 1, kMaxLayers),
      int_field("moe_offset", m.moe_offset, true, "", "offset of the MoE layers within each moe_every group", 0, kMaxLayers),
      int_field("hidden", static_cast<double>(m.hidden), d, "", "model (hidden) dimension", 1, kMaxWidth),
      int_field("expert_ffn", static_cast<double>(m.expert_ffn), d, "", "routed expert intermediate size (0 in a dense model)", 0, kMaxFfn),
      int_field("dense_ffn", static_cast<double>(m.dense_ffn), true, "", "dense-layer FFN intermediate size", 0, kMaxFfn),
      int_field("experts", m.experts, d, "", "routed experts per MoE layer (0: a dense model, no MoE layer)", 0, kMaxExperts),
      int_field("top_k", m.top_k, d, "", "experts selected per token (0 in a dense model)", 0, kMaxTopK),
      int_field("shared_experts", m.shared_experts, true, "", "always-active shared experts", 0, kMaxTopK),
      int_field("shared_expert_ffn", static_cast<double>(m.shared_expert_ffn), true, "", "shared expert intermediate size", 0, kMaxFfn),
      choice_field("activation", d ? activation_name(m.activation) : "swiglu", "expert activation",
                   {"relu", "gelu", "swiglu"}),
      choice_field("dtype", d ? dtype_name(m.dtype) : "bf16",
                   "weight and activation type (fp4 = nvfp4; the 4-bit types count their block scales)", dtype_names()),
      choice_field("kv_dtype", d && m.kv_dtype ? dtype_name(*m.kv_dtype) : "auto",
                   "KV-cache element type (auto: the weights' dtype)", with_auto(dtype_names())),
      choice_field("expert_dtype", d && m.expert_dtype ? dtype_name(*m.expert_dtype) : "auto",
                   "routed experts' weight type (auto: dtype), e.g. nvfp4 experts with fp8 attention, or int4 "
                   "(weight-only, with expert_quantization weight-only)",
                   with_auto(dtype_names())),
      choice_field("expert_quantization", d && m.expert_weight_only ? "weight-only" : "weight-and-activation",
                   "weight-and-activation: expert GEMMs run at expert_dtype's tensor-core peak (W4A4, W8A8); "
                   "weight-only: weights are dequantised in the kernel and the math runs in dtype (W4A16)",
                   {"weight-and-activation", "weight-only"}),
      int_field("vocab", static_cast<double>(m.vocab), true, "", "vocabulary size (embeddings)", 0, kMaxVocab),
      int_field("full_attention_every", m.full_attention_every, true, "",
                "with attention.window (or linear attention): every n-th layer attends the whole context, the "
                "others the window (GPT-OSS 2, Llama 4 4) or run Gated DeltaNet (Qwen3.5 4); 0: every layer uses "
                "the window (or linear attention)", 0, kMaxLayers),
      int_field("linear_key_heads", m.linear_attention.key_heads, true, "",
                "Gated DeltaNet (Qwen3.5 linear_attention layers): key heads; 0 = no linear attention", 0, kMaxWidth),
      int_field("linear_value_heads", m.linear_attention.value_heads, true, "",
                "Gated DeltaNet value heads (a multiple of linear_key_heads)", 0, kMaxWidth),
      int_field("linear_key_head_dim", m.linear_attention.key_head_dim, true, "", "Gated DeltaNet key head dim", 0,
                kMaxWidth),
      int_field("linear_value_head_dim", m.linear_attention.value_head_dim, true, "", "Gated DeltaNet value head dim",
                0, kMaxWidth),
      int_field("linear_conv_kernel", m.linear_attention.conv_kernel, true, "",
                "Gated DeltaNet causal convolution width", 0, 64),
      choice_field("linear_state_dtype", dtype_name(m.linear_attention.state_dtype),
                   "element type of the Gated DeltaNet state (Qwen3.5's mamba_ssm_dtype: fp32)", dtype_names()),
      int_field("mtp_layers", m.mtp_layers, true, "",
                "multi-token-prediction modules shipped with the model (num_nextn_predict_layers): drafts for "
                "serving.speculative method mtp", 0, 64),
      int_field("max_context", static_cast<double>(m.max_context), true, "tokens",
                "longest sequence (prompt + output) the model accepts: the config's max_position_embeddings "
                "(0: unknown, not checked)", 0, kMaxContext),
  };
}

namespace {

/// Values a config.json or a preset supplies pass the same declared ranges as values written in
/// the scenario: a value reaching the model by a second road skips no check (issue 52; a
/// config.json with head_dim 0 priced a KV cache of 0 bytes per token).
void check_inherited_ranges(const ParamSet& set, const std::vector<ParamSpec>& specs, const SourceLocation& at,
                            const std::string& origin, Diagnostics& diags) {
  for (const ParamSpec& s : specs) {
    if (set.given(s.name) || (s.type != ParamType::kInt && s.type != ParamType::kFloat)) continue;
    const double v = s.type == ParamType::kInt ? static_cast<double>(set.get_int(s.name)) : set.get_float(s.name);
    if ((s.min && v < *s.min) || (s.max && v > *s.max))
      diags.error(at, origin + " sets '" + s.name + "' to " + num(v) + ", outside its range " +
                          (s.min ? num(*s.min) : std::string("-inf")) + " .. " + (s.max ? num(*s.max) : std::string("inf")));
  }
}

/// `hf_config: PATH` (relative to the scenario's folder): the model its config.json describes, or
/// nothing after recording the error. Fields moesim ignores are one warning.
std::optional<ModelSpec> model_of_hf_config(const YAML::Node& key, const SourceMap& src, Diagnostics& diags,
                                            const std::string& base_dir, std::vector<Diagnostic>* warnings) {
  if (!key.IsScalar() || key.Scalar().empty()) {
    diags.error(src.locate(key), "'hf_config' must be the path of a Hugging Face config.json");
    return std::nullopt;
  }
  const std::filesystem::path path = std::filesystem::path(key.Scalar()).is_absolute()
                                         ? std::filesystem::path(key.Scalar())
                                         : std::filesystem::path(base_dir) / key.Scalar();
  std::error_code ec;
  std::ifstream in(path);
  if (std::filesystem::is_directory(path, ec) || !in) {
    diags.error(src.locate(key), "cannot read hf_config " + path.string());
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json config;
  try {
    config = parse_json_input(text.str(), path.string(), "not JSON");
  } catch (const InputError& e) {
    for (const auto& d : e.diagnostics()) diags.error(src.locate(key), "hf_config " + d.where.to_string() + ": " + d.message);
    return std::nullopt;
  }
  HfConfigRead read = model_from_hf_config(config, path.stem().string());
  if (!read.ok()) {
    diags.error(src.locate(key), "hf_config " + path.string() + ": " + read.error);
    return std::nullopt;
  }
  if (warnings && !read.ignored.empty()) {
    std::string list;
    for (const auto& f : read.ignored) list += (list.empty() ? "" : ", ") + f;
    warnings->push_back(Diagnostic{src.locate(key), "hf_config fields moesim does not use: " + list, true});
  }
  return read.model;
}

}  // namespace

namespace {

/// The model fields of `p` (model_field_specs) and the attention fields of `a` (attention_specs) into `m`.
void set_model_fields(const ParamSet& p, const ParamSet& a, ModelSpec& m) {
  m.layers = static_cast<int>(p.get_int("layers"));
  m.first_dense_layers = static_cast<int>(p.get_int("first_dense_layers"));
  m.moe_every = static_cast<int>(p.get_int("moe_every"));
  m.moe_offset = static_cast<int>(p.get_int("moe_offset"));
  m.hidden = p.get_int("hidden");
  m.expert_ffn = p.get_int("expert_ffn");
  m.dense_ffn = p.get_int("dense_ffn");
  m.experts = static_cast<int>(p.get_int("experts"));
  m.top_k = static_cast<int>(p.get_int("top_k"));
  m.shared_experts = static_cast<int>(p.get_int("shared_experts"));
  m.shared_expert_ffn = p.get_int("shared_expert_ffn");
  parse_activation(p.get_string("activation"), m.activation);
  parse_dtype(p.get_string("dtype"), m.dtype);
  if (DType kv{}; p.get_string("kv_dtype") != "auto" && parse_dtype(p.get_string("kv_dtype"), kv)) m.kv_dtype = kv;
  if (DType ex{}; p.get_string("expert_dtype") != "auto" && parse_dtype(p.get_string("expert_dtype"), ex))
    m.expert_dtype = ex;
  m.expert_weight_only = p.get_string("expert_quantization") == "weight-only";
  m.vocab = p.get_int("vocab");
  m.max_context = p.get_int("max_context");
  m.full_attention_every = static_cast<int>(p.get_int("full_attention_every"));
  m.mtp_layers = static_cast<int>(p.get_int("mtp_layers"));
  LinearAttentionSpec& la = m.linear_attention;
  la.key_heads = static_cast<int>(p.get_int("linear_key_heads"));
  la.value_heads = static_cast<int>(p.get_int("linear_value_heads"));
  la.key_head_dim = static_cast<int>(p.get_int("linear_key_head_dim"));
  la.value_head_dim = static_cast<int>(p.get_int("linear_value_head_dim"));
  la.conv_kernel = static_cast<int>(p.get_int("linear_conv_kernel"));
  parse_dtype(p.get_string("linear_state_dtype"), la.state_dtype);
  AttentionSpec& at = m.attention;
  parse_attention_kind(a.get_string("kind"), at.kind);
  at.heads = static_cast<int>(a.get_int("heads"));
  at.kv_heads = static_cast<int>(a.get_int("kv_heads"));
  at.head_dim = static_cast<int>(a.get_int("head_dim"));
  at.window = a.get_int("window");
  at.causal = a.get_bool("causal");
  at.q_lora_rank = static_cast<int>(a.get_int("q_lora_rank"));
  at.kv_lora_rank = static_cast<int>(a.get_int("kv_lora_rank"));
  at.qk_nope_head_dim = static_cast<int>(a.get_int("qk_nope_head_dim"));
  at.qk_rope_head_dim = static_cast<int>(a.get_int("qk_rope_head_dim"));
  at.v_head_dim = static_cast<int>(a.get_int("v_head_dim"));
  at.output_gate = a.get_bool("output_gate");
  at.index_heads = static_cast<int>(a.get_int("index_heads"));
  at.index_head_dim = static_cast<int>(a.get_int("index_head_dim"));
  at.index_topk = a.get_int("index_topk");
}

/// Cross-field checks of a model, each located at the field that is out of range.
void check_model_fields(const ModelSpec& m, const ParamSet& p, const ParamSet& a, const YAML::Node& node,
                        const SourceMap& src, Diagnostics& diags) {
  const AttentionSpec& at = m.attention;
  if (m.top_k > m.experts)
    diags.error(p.where("top_k").line ? p.where("top_k") : src.locate(node),
                "'top_k' (" + std::to_string(m.top_k) + ") exceeds the number of experts (" +
                    std::to_string(m.experts) + ")");
  if (m.moe_offset >= m.moe_every)
    diags.error(p.where("moe_offset").line ? p.where("moe_offset") : src.locate(node),
                "'moe_offset' must be smaller than 'moe_every'");
  if (at.kv_heads > at.heads || (at.kv_heads > 0 && at.heads % at.kv_heads != 0))
    diags.error(a.where("kv_heads").line ? a.where("kv_heads") : src.locate(node),
                "'kv_heads' must divide 'heads'");
  const auto at_key = [&](const char* f) { return p.where(f).line ? p.where(f) : src.locate(node); };
  if (m.experts == 0) {
    // A dense model (Llama, Qwen3): every layer runs dense_ffn; nothing is routed.
    for (const char* f : {"top_k", "expert_ffn"})
      if (p.get_int(f) != 0)
        diags.error(at_key(f), std::string("a dense model ('experts: 0') routes no token: '") + f + "' must be 0, got " +
                                   std::to_string(p.get_int(f)));
  } else {
    if (m.top_k < 1) diags.error(at_key("top_k"), "'top_k' must be >= 1 in an MoE model ('experts' > 0)");
    if (m.expert_ffn < 1) diags.error(at_key("expert_ffn"), "'expert_ffn' must be >= 1 in an MoE model ('experts' > 0)");
    if (m.num_moe_layers() == 0 && m.layers > 0)
      diags.error(src.locate(node), "the model has no MoE layer (check first_dense_layers, moe_every; "
                                    "'experts: 0' declares a dense model)");
  }
  if (const int dense = m.layers - m.num_moe_layers(); dense > 0 && m.dense_ffn <= 0)
    diags.error(p.given("dense_ffn") ? p.where("dense_ffn") : src.locate(node),
                "the model has " + std::to_string(dense) + " dense layer(s) ('first_dense_layers', 'moe_every'): "
                "'dense_ffn' must be > 0");
  if (m.shared_experts > 0 && m.shared_expert_ffn <= 0)
    diags.error(p.given("shared_experts") ? p.where("shared_experts") : src.locate(node),
                "'shared_experts' (" + std::to_string(m.shared_experts) + ") needs 'shared_expert_ffn' > 0");
  // INT4 is a weight-only storage format (no INT4 tensor cores on Hopper or Blackwell; W4A16
  // kernels dequantise it): only routed experts' weights under expert_quantization weight-only.
  for (const char* f : {"dtype", "kv_dtype"})
    if (p.get_string(f) == "int4")
      diags.error(at_key(f), std::string("'") + f + ": int4' is a weight-only format; it is for 'expert_dtype' with "
                                              "'expert_quantization: weight-only' (W4A16), not for activations or caches");
  if (p.get_string("expert_dtype") == "int4" && !m.expert_weight_only)
    diags.error(at_key("expert_dtype"), "'expert_dtype: int4' needs 'expert_quantization: weight-only': INT4 weights "
                                        "are dequantised in the kernel (W4A16), no GPU here multiplies INT4 activations");
  // Gated DeltaNet: all its widths or none, value heads grouped over key heads, and not beside a
  // sliding window (one local form per model).
  const LinearAttentionSpec& la = m.linear_attention;
  const char* linear_fields[] = {"linear_key_heads", "linear_value_heads", "linear_key_head_dim",
                                 "linear_value_head_dim", "linear_conv_kernel"};
  bool any_linear = false;
  for (const char* f : linear_fields) any_linear = any_linear || p.get_int(f) > 0;
  if (any_linear) {
    for (const char* f : linear_fields)
      if (p.get_int(f) <= 0)
        diags.error(at_key(f), std::string("linear attention needs '") + f +
                                   "' > 0 beside the other linear_* fields (0 in all: no linear attention)");
    if (la.key_heads > 0 && la.value_heads % la.key_heads != 0)
      diags.error(at_key("linear_value_heads"), "'linear_value_heads' (" + std::to_string(la.value_heads) +
                                                    ") must be a multiple of 'linear_key_heads' (" +
                                                    std::to_string(la.key_heads) + ")");
    if (at.window > 0)
      diags.error(a.given("window") ? a.where("window") : src.locate(node),
                  "a model with linear attention has no sliding window: its non-full layers are the linear ones");
  }
  // The attention kind and its fields must agree: a contradiction would price a KV cache of 0
  // bytes (MLA without its latent rank) or of the wrong head count.
  const SourceLocation kind_at = a.given("kind") ? a.where("kind") : src.locate(node);
  const auto at_field = [&](const char* f) { return a.given(f) ? a.where(f) : kind_at; };
  if (at.kind == AttentionKind::kMla) {
    for (const char* f : {"kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"})
      if (a.get_int(f) <= 0)
        diags.error(at_field(f), std::string("attention 'kind: mla' needs '") + f + "' > 0 (DeepSeek-V2 §2.1's "
                                 "latent and head dimensions)");
    const bool any_index = at.index_heads > 0 || at.index_head_dim > 0 || at.index_topk > 0;
    if (any_index)
      for (const char* f : {"index_heads", "index_head_dim", "index_topk"})
        if (a.get_int(f) <= 0)
          diags.error(at_field(f), std::string("DeepSeek Sparse Attention needs '") + f +
                                       "' > 0 beside the other index_* fields (0 in all three: dense attention)");
    if (at.output_gate) diags.error(at_field("output_gate"), "'output_gate' is a gated GQA/MHA attention; MLA has none");
  } else if (at.index_heads > 0 || at.index_head_dim > 0 || at.index_topk > 0) {
    diags.error(at_field(at.index_topk > 0 ? "index_topk" : at.index_heads > 0 ? "index_heads" : "index_head_dim"),
                "DeepSeek Sparse Attention (index_*) selects keys for MLA: it needs attention 'kind: mla'");
  } else if (at.kind == AttentionKind::kMqa && at.kv_heads != 1) {
    diags.error(at_field("kv_heads"), "attention 'kind: mqa' has one key/value head: 'kv_heads' must be 1, got " +
                                          std::to_string(at.kv_heads));
  } else if (at.kind == AttentionKind::kMha && at.kv_heads != at.heads) {
    diags.error(at_field("kv_heads"), "attention 'kind: mha' has a key/value head per query head: 'kv_heads' (" +
                                          std::to_string(at.kv_heads) + ") must equal 'heads' (" +
                                          std::to_string(at.heads) + "); grouped heads are 'kind: gqa'");
  }
}

}  // namespace

ModelSpec read_model_section(const YAML::Node& node, const SourceMap& src, Diagnostics& diags,
                             YAML::Node& resolved, const std::string& base_dir, std::vector<Diagnostic>* warnings) {
  ModelSpec m;
  if (!node || (!node.IsScalar() && !node.IsMap())) {
    diags.error(node ? src.locate(node) : SourceLocation{src.file(), 0, 0},
                "'model' must be a preset name or a mapping");
    return m;
  }
  std::string preset;
  std::optional<ModelSpec> from_config;
  const ModelSpec* base = nullptr;
  if (node.IsMap() && node["hf_config"]) {
    if (node["preset"]) diags.error(src.locate(node["hf_config"]), "give either 'preset' or 'hf_config', not both");
    from_config = model_of_hf_config(node["hf_config"], src, diags, base_dir, warnings);
    if (!from_config) return m;
    base = &*from_config;
  } else {
    base = preset_of(node, model_presets(), src, diags, preset);
  }
  if (node.IsScalar() && !base) return m;
  const YAML::Node map = node.IsMap() ? node : YAML::Node();
  const ParamSet p = read_params(map, model_field_specs(base), src, diags, {"preset", "name", "attention", "hf_config"});
  const YAML::Node attn_node = map ? map["attention"] : YAML::Node();
  const ParamSet a = read_params(attn_node, attention_specs(base ? &base->attention : nullptr), src, diags);
  m.name = map && map["name"] ? map["name"].as<std::string>() : (base ? base->name : std::string("custom"));
  if (from_config) {
    const SourceLocation at = src.locate(node["hf_config"]);
    check_inherited_ranges(p, model_field_specs(base), at, "hf_config", diags);
    check_inherited_ranges(a, attention_specs(&base->attention), at, "hf_config (attention)", diags);
  }
  set_model_fields(p, a, m);
  // Not a key: the checkpoint's quantisation (preset or config.json) says which FP8 kernels run.
  m.fp8_block_scales = base && base->fp8_block_scales && m.dtype == DType::kFp8;
  check_model_fields(m, p, a, node, src, diags);
  resolved = p.to_yaml();
  resolved["name"] = m.name;
  if (!preset.empty()) resolved["preset"] = preset;
  resolved["attention"] = a.to_yaml();
  return m;
}

std::vector<ParamSpec> gpu_field_specs(const GpuSpec& g) {
  return {
      float_field("fp32_TFLOPS", g.peak(DType::kFp32) / 1e12, "TFLOP/s", "dense fp32 peak", 0.0, kMaxTflops),
      float_field("fp16_TFLOPS", g.peak(DType::kFp16) / 1e12, "TFLOP/s", "dense fp16 tensor peak (0 = unsupported)", 0.0, kMaxTflops),
      float_field("bf16_TFLOPS", g.peak(DType::kBf16) / 1e12, "TFLOP/s", "dense bf16 tensor peak (0 = unsupported)", 0.0, kMaxTflops),
      float_field("fp8_TFLOPS", g.peak(DType::kFp8) / 1e12, "TFLOP/s", "dense fp8 tensor peak (0 = unsupported)", 0.0, kMaxTflops),
      float_field("fp4_TFLOPS", g.peak(DType::kNvFp4) / 1e12, "TFLOP/s",
                  "dense fp4 (NVFP4/MXFP4) tensor peak (0 = unsupported: fp4 runs at the fp8, else fp16, peak)", 0.0,
                  kMaxTflops),
      float_field("hbm_bandwidth_GBps", g.hbm_bandwidth_Bps / 1e9, "GB/s", "device memory bandwidth", kMinGBps, kMaxGBps),
      float_field("memory_GB", g.memory_bytes / 1e9, "GB", "device memory capacity", 1e-3, 1e5),
      int_field("pcie_gen", g.pcie_gen, true, "", "PCIe generation of the host link", 1, 8),
      int_field("sm_count", g.sm_count, true, "", "streaming multiprocessors", 0, 1e5),
      int_field("compute_capability", g.compute_capability, true, "",
                "CUDA compute capability x 10 (70 Volta, 80 A100, 86/89 GeForce, 90 Hopper): NCCL's tuning tables",
                30, 200),
      int_field("copy_engines", g.copy_engines, true, "", "asynchronous copy engines", 1, 64),
      float_field("kernel_launch_us", g.kernel_launch_us, "us", "fixed cost per kernel launch", 0.0, kMaxLatencyUs),
  };
}

std::vector<ParamSpec> cluster_field_specs(const ClusterSpec& c) {
  return {
      int_field("nodes", c.nodes, true, "", "nodes joined by NICs", 1, 16384),
      int_field("gpus_per_node", c.gpus_per_node, true, "", "GPUs in each node", 1, 1024),
      choice_field("fabric", fabric_name(c.fabric), "intra-node GPU interconnect",
                   {"nvswitch", "nvlink-mesh", "hybrid-cube-mesh", "pcie"}),
      float_field("nvlink_bandwidth_GBps", c.nvlink_bandwidth_GBps, "GB/s",
                  "per direction: per GPU (nvswitch), per pair (nvlink-mesh), per brick (hybrid-cube-mesh); "
                  "0 = none (pcie fabric)", 0.0, kMaxGBps),
      float_field("nvlink_latency_us", c.nvlink_latency_us, "us", "per NVLink hop", 0.0, kMaxLatencyUs),
      float_field("pcie_bandwidth_GBps", c.pcie_bandwidth_GBps, "GB/s", "GPU to PCIe switch, per direction", kMinGBps, kMaxGBps),
      float_field("pcie_latency_us", c.pcie_latency_us, "us", "per PCIe hop", 0.0, kMaxLatencyUs),
      int_field("gpus_per_pcie_switch", c.gpus_per_pcie_switch, true, "", "GPUs under each PCIe switch", 1, 1024),
      float_field("pcie_uplink_GBps", c.pcie_uplink_GBps, "GB/s", "PCIe switch to CPU, per direction", kMinGBps, kMaxGBps),
      int_field("sockets", c.sockets, true, "", "CPU sockets per node", 1, 64),
      float_field("socket_link_GBps", c.socket_link_GBps, "GB/s", "CPU to CPU link, per direction; 0 = none (one socket)", 0.0, kMaxGBps),
      float_field("nic_bandwidth_Gbps", c.nic_bandwidth_Gbps, "Gbit/s", "per NIC, per direction; 0 = none (one node)", 0.0, 8 * kMaxGBps),
      int_field("nics_per_node", c.nics_per_node, true, "", "NICs per node", 0, 1024),
      float_field("nic_latency_us", c.nic_latency_us, "us", "NIC to network switch hop", 0.0, kMaxLatencyUs),
      float_field("collective_launch_us", c.collective_launch_us, "us",
                  "fixed software cost of one collective under collective_model line-rate (unused by nccl, "
                  "which prices launches with NCCL's base latencies)", 0.0, kMaxLatencyUs),
      choice_field("collective_model", c.collective_model,
                   "how collectives are priced: nccl = the algorithm (ring, tree, NVLS) and protocol (LL, LL128, "
                   "Simple) NCCL 2.19's tuning model picks per size, at NCCL's link rates; line-rate = rings at "
                   "nominal link rates after collective_launch_us",
                   {"nccl", "line-rate"}),
      float_field("host_speed", c.host_speed, "",
                  "host CPU speed relative to the hosts the host work's times come from (policies' scheduling "
                  "and solves, predictors' overhead, serving engines' per-step time, AMoE's decisions): each "
                  "host task takes its reference time / host_speed",
                  1e-3, 1e3),
      choice_field("cpu_vendor", c.cpu_vendor,
                   "host CPU vendor: NCCL's multi-node LL bandwidth and per-step network overhead depend on it",
                   {"amd", "intel"}),
      choice_field("network_model", c.network_model,
                   "how transfers are timed: flow = max-min fair sharing recomputed on every flow start/end "
                   "(use up to ~64 GPUs, or when overlapping collectives contend); analytic = each tick's "
                   "transfers priced from the bytes on their busiest link (use for very large clusters)",
                   network_models().names()),
      float_field("flow_completion_window_us", c.flow_completion_window_us, "us",
                  "flow backend only, an approximation: when the earliest flow completes, every flow due "
                  "within this window completes with it and the rates are recomputed once (flows end up to "
                  "this much early; docs/benchmarks.md measures the error); 0 = exact",
                  0.0, kMaxLatencyUs),
      choice_field("all_to_all_model", c.all_to_all_model,
                   "how all-to-alls are planned: flows = one transfer per GPU pair, timed by the network "
                   "backend; closed-form = an approximation for large runs: one task per GPU, its call's end "
                   "worked out when the step is planned from the all-to-all's link loads (the analytic "
                   "backend's rule), the calls starting together at the latest launch and sharing no link "
                   "with other traffic (docs/benchmarks.md measures the error)",
                   {"flows", "closed-form"}),
      choice_field("compute_model", c.compute_model,
                   "how kernels are priced: roofline = the slower of their FLOPs (with tile and k-loop "
                   "losses) and their memory traffic; flops-only = time proportional to FLOPs at peak "
                   "efficiency, no memory-bound regime (MoE-GPS §2: FFN time grows with its tokens; §5: "
                   "the simulator 'assumes ... compute is saturated')",
                   compute_models().names()),
  };
}

namespace {

GpuSpec read_gpu(const YAML::Node& node, const GpuSpec* fallback, const SourceMap& src, Diagnostics& diags,
                 YAML::Node& resolved) {
  std::string preset;
  const GpuSpec* base = node ? preset_of(node, gpu_presets(), src, diags, preset) : nullptr;
  if (!base) base = fallback;
  if (!base) {
    if (node && node.IsMap() && !node["preset"])
      diags.error(src.locate(node), "'gpu' needs a 'preset' to start from");
    else if (!node)
      diags.error(SourceLocation{src.file(), 0, 0}, "a custom cluster needs 'gpu'");
    return GpuSpec{};
  }
  const YAML::Node map = node && node.IsMap() ? node : YAML::Node();
  const ParamSet p = read_params(map, gpu_field_specs(*base), src, diags, {"preset"});
  GpuSpec g = *base;
  g.peak_flops[static_cast<int>(DType::kFp32)] = p.get_float("fp32_TFLOPS") * 1e12;
  g.peak_flops[static_cast<int>(DType::kFp16)] = p.get_float("fp16_TFLOPS") * 1e12;
  g.peak_flops[static_cast<int>(DType::kBf16)] = p.get_float("bf16_TFLOPS") * 1e12;
  g.peak_flops[static_cast<int>(DType::kFp8)] = p.get_float("fp8_TFLOPS") * 1e12;
  g.peak_flops[static_cast<int>(DType::kNvFp4)] = p.get_float("fp4_TFLOPS") * 1e12;
  g.peak_flops[static_cast<int>(DType::kMxFp4)] = p.get_float("fp4_TFLOPS") * 1e12;
  g.hbm_bandwidth_Bps = p.get_float("hbm_bandwidth_GBps") * 1e9;
  g.memory_bytes = p.get_float("memory_GB") * 1e9;
  g.pcie_gen = static_cast<int>(p.get_int("pcie_gen"));
  g.sm_count = static_cast<int>(p.get_int("sm_count"));
  g.compute_capability = static_cast<int>(p.get_int("compute_capability"));
  g.copy_engines = static_cast<int>(p.get_int("copy_engines"));
  g.kernel_launch_us = p.get_float("kernel_launch_us");
  for (const char* k : {"hbm_bandwidth_GBps", "memory_GB"})
    if (p.get_float(k) <= 0.0) diags.error(p.where(k).line ? p.where(k) : src.locate(node), std::string("'") + k + "' must be > 0");
  // A peak is 0 (the dtype is unsupported) or a real one: 1e-12 TFLOP/s would make every kernel
  // outlast simulated time's range.
  for (const char* k : {"fp32_TFLOPS", "fp16_TFLOPS", "bf16_TFLOPS", "fp8_TFLOPS", "fp4_TFLOPS"})
    if (p.get_float(k) > 0.0 && p.get_float(k) < 1e-2)
      diags.error(p.given(k) ? p.where(k) : src.locate(node),
                  std::string("'") + k + "' must be 0 (unsupported) or at least 0.01 TFLOP/s, got " + num(p.get_float(k)));
  if (g.peak(DType::kFp32) <= 0.0 && g.peak(DType::kFp16) <= 0.0)
    diags.error(src.locate(node), "the GPU needs a positive fp32 or fp16 peak");
  resolved = p.to_yaml();
  resolved["preset"] = preset.empty() ? base->name : preset;
  return g;
}

}  // namespace

namespace {

/// The cluster fields of `p` (the keys cluster_field_specs declares) into `c`.
void set_cluster_fields(const ParamSet& p, ClusterSpec& c) {
  c.nodes = static_cast<int>(p.get_int("nodes"));
  c.gpus_per_node = static_cast<int>(p.get_int("gpus_per_node"));
  parse_fabric(p.get_string("fabric"), c.fabric);
  c.nvlink_bandwidth_GBps = p.get_float("nvlink_bandwidth_GBps");
  c.nvlink_latency_us = p.get_float("nvlink_latency_us");
  c.pcie_bandwidth_GBps = p.get_float("pcie_bandwidth_GBps");
  c.pcie_latency_us = p.get_float("pcie_latency_us");
  c.gpus_per_pcie_switch = static_cast<int>(p.get_int("gpus_per_pcie_switch"));
  c.pcie_uplink_GBps = p.get_float("pcie_uplink_GBps");
  c.sockets = static_cast<int>(p.get_int("sockets"));
  c.socket_link_GBps = p.get_float("socket_link_GBps");
  c.nic_bandwidth_Gbps = p.get_float("nic_bandwidth_Gbps");
  c.nics_per_node = static_cast<int>(p.get_int("nics_per_node"));
  c.nic_latency_us = p.get_float("nic_latency_us");
  c.collective_launch_us = p.get_float("collective_launch_us");
  c.collective_model = p.get_string("collective_model");
  c.host_speed = p.get_float("host_speed");
  c.cpu_vendor = p.get_string("cpu_vendor");
  c.network_model = p.get_string("network_model");
  c.flow_completion_window_us = p.get_float("flow_completion_window_us");
  c.all_to_all_model = p.get_string("all_to_all_model");
  c.compute_model = p.get_string("compute_model");
}

/// What the topology needs of the fields: bandwidths > 0 on the links the fabric uses, real
/// bandwidths (or 0 for none), NICs between nodes, at most 16,384 GPUs, and the builder's checks.
void check_cluster_fields(const ClusterSpec& c, const ParamSet& p, const YAML::Node& node, const SourceMap& src,
                          Diagnostics& diags) {
  // Zero bandwidth on a link the fabric uses is an error at that key.
  auto need_positive = [&](const char* key, double v) {
    if (v <= 0.0) diags.error(p.given(key) ? p.where(key) : src.locate(node),
                              std::string("'") + key + "' must be > 0 for this cluster");
  };
  // A link bandwidth is 0 (the cluster has no such link) or a real one: 1e-15 GB/s would make
  // every transfer outlast simulated time's range.
  for (const auto& [key, min] : {std::pair{"nvlink_bandwidth_GBps", kMinGBps}, std::pair{"socket_link_GBps", kMinGBps},
                                 std::pair{"nic_bandwidth_Gbps", 8 * kMinGBps}})
    if (p.get_float(key) > 0.0 && p.get_float(key) < min)
      diags.error(p.given(key) ? p.where(key) : src.locate(node),
                  std::string("'") + key + "' must be 0 (no such link) or at least " + num(min) + ", got " +
                      num(p.get_float(key)));
  if (c.fabric != Fabric::kPcie) need_positive("nvlink_bandwidth_GBps", c.nvlink_bandwidth_GBps);
  need_positive("pcie_bandwidth_GBps", c.pcie_bandwidth_GBps);
  need_positive("pcie_uplink_GBps", c.pcie_uplink_GBps);
  if (c.sockets > 1) need_positive("socket_link_GBps", c.socket_link_GBps);
  if (c.nodes > 1) {
    need_positive("nic_bandwidth_Gbps", c.nic_bandwidth_Gbps);
    if (c.nics_per_node < 1)
      diags.error(p.where("nics_per_node").line ? p.where("nics_per_node") : src.locate(node),
                  "'nics_per_node' must be >= 1 when nodes > 1");
  }
  // The size limit: beyond it, building the topology and its routes alone takes tens of GB.
  constexpr std::int64_t kMaxGpus = 16384;
  if (static_cast<std::int64_t>(c.nodes) * c.gpus_per_node > kMaxGpus)
    diags.error(p.where("nodes").line ? p.where("nodes") : src.locate(node),
                "the cluster has " + std::to_string(static_cast<std::int64_t>(c.nodes) * c.gpus_per_node) +
                    " GPUs (nodes x gpus_per_node); moesim simulates at most " + std::to_string(kMaxGpus));
  if (diags.empty()) {
    try {
      Cluster check(c);  // the topology builder's own consistency checks
    } catch (const std::invalid_argument& e) {
      diags.error(src.locate(node), std::string("invalid cluster: ") + e.what());
    }
  }
}

/// `hardware.calibration`: "builtin" (the default: the GPU architecture's measured kernels),
/// "none" (the datasheet roofline) or a profile path, applied to `c`; `resolved` names what was
/// applied (a path made absolute).
void read_calibration(const YAML::Node& map, const std::string& base_dir, ClusterSpec& c, YAML::Node& resolved,
                      const SourceMap& src, Diagnostics& diags) {
  const bool given = map && map["calibration"] && !map["calibration"].IsNull();
  const YAML::Node cal = given ? map["calibration"] : YAML::Node();
  if (given && !cal.IsScalar()) {
    diags.error(src.locate(cal), "'calibration' must be builtin, none or the path of a profile from `moesim calibrate fit`");
    return;
  }
  const std::string choice = given ? cal.Scalar() : "builtin";
  if (choice == "builtin" || choice == "none") {
    apply_calibration_choice(c, choice);
    resolved["calibration"] = choice == "builtin" && !c.calibration ? "none" : choice;
    return;
  }
  const std::filesystem::path path =
      std::filesystem::path(choice).is_absolute() ? std::filesystem::path(choice) : std::filesystem::path(base_dir) / choice;
  try {
    apply_calibration(c, load_calibration(path.string()));
    // Absolute, so scenario.resolved.yaml re-runs from its results folder.
    resolved["calibration"] = std::filesystem::absolute(path).lexically_normal().string();
  } catch (const InputError& e) {
    for (const auto& d : e.diagnostics())
      diags.error(src.locate(cal), "calibration profile " + d.where.to_string() + ": " + d.message);
  }
}

}  // namespace

ClusterSpec read_hardware_section(const YAML::Node& node, const SourceMap& src, Diagnostics& diags,
                                  YAML::Node& resolved, const std::string& base_dir) {
  ClusterSpec c;
  if (!node || (!node.IsScalar() && !node.IsMap())) {
    diags.error(node ? src.locate(node) : SourceLocation{src.file(), 0, 0},
                "'hardware' must be a preset name or a mapping");
    return c;
  }
  std::string preset;
  const ClusterSpec* base = preset_of(node, cluster_presets(), src, diags, preset);
  if (node.IsScalar() && !base) return c;
  const ClusterSpec start = base ? *base : ClusterSpec{};
  const YAML::Node map = node.IsMap() ? node : YAML::Node();
  const ParamSet p = read_params(map, cluster_field_specs(start), src, diags, {"preset", "gpu", "name", "calibration"});
  YAML::Node gpu_resolved;
  c.gpu = read_gpu(map ? map["gpu"] : YAML::Node(), base ? &base->gpu : nullptr, src, diags, gpu_resolved);
  c.name = map && map["name"] ? map["name"].as<std::string>() : (base ? base->name : std::string("custom"));
  set_cluster_fields(p, c);
  check_cluster_fields(c, p, node, src, diags);
  resolved = p.to_yaml();
  resolved["name"] = c.name;
  if (!preset.empty()) resolved["preset"] = preset;
  resolved["gpu"] = gpu_resolved;
  read_calibration(map, base_dir, c, resolved, src, diags);
  return c;
}

}  // namespace moesim
