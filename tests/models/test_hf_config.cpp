// Models read from Hugging Face config.json files (tests/data/hf/, copies without weights; see
// SOURCES.md there): each shipped preset equals the model its config describes, field by field;
// parameter totals match the model cards; bad configs are errors naming the field.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "models/hf_config.hpp"
#include "models/model_spec.hpp"

namespace moesim {
namespace {

namespace fs = std::filesystem;

nlohmann::json config_of(const std::string& preset) {
  const char* root = std::getenv("MOESIM_SOURCE_ROOT");
  const fs::path path = fs::path(root ? root : ".") / "tests/data/hf" / (preset + ".json");
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

ModelSpec read_config(const std::string& preset) {
  const HfConfigRead r = model_from_hf_config(config_of(preset), preset);
  EXPECT_TRUE(r.ok()) << preset << ": " << r.error;
  return r.model;
}

void expect_same(const ModelSpec& a, const ModelSpec& b) {
  EXPECT_EQ(a.layers, b.layers);
  EXPECT_EQ(a.first_dense_layers, b.first_dense_layers);
  EXPECT_EQ(a.moe_every, b.moe_every);
  EXPECT_EQ(a.moe_offset, b.moe_offset);
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.expert_ffn, b.expert_ffn);
  EXPECT_EQ(a.dense_ffn, b.dense_ffn);
  EXPECT_EQ(a.experts, b.experts);
  EXPECT_EQ(a.top_k, b.top_k);
  EXPECT_EQ(a.shared_experts, b.shared_experts);
  EXPECT_EQ(a.shared_expert_ffn, b.shared_expert_ffn);
  EXPECT_EQ(a.activation, b.activation);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.expert_weight_dtype(), b.expert_weight_dtype());
  EXPECT_EQ(a.vocab, b.vocab);
  EXPECT_EQ(a.tied_embeddings, b.tied_embeddings);
  EXPECT_EQ(a.max_context, b.max_context);
  EXPECT_EQ(a.full_attention_every, b.full_attention_every);
  EXPECT_EQ(a.mtp_layers, b.mtp_layers);
  const LinearAttentionSpec &l = a.linear_attention, &k = b.linear_attention;
  EXPECT_EQ(l.key_heads, k.key_heads);
  EXPECT_EQ(l.value_heads, k.value_heads);
  EXPECT_EQ(l.key_head_dim, k.key_head_dim);
  EXPECT_EQ(l.value_head_dim, k.value_head_dim);
  EXPECT_EQ(l.conv_kernel, k.conv_kernel);
  EXPECT_EQ(l.state_dtype, k.state_dtype);
  const AttentionSpec &x = a.attention, &y = b.attention;
  EXPECT_EQ(x.kind, y.kind);
  EXPECT_EQ(x.heads, y.heads);
  EXPECT_EQ(x.kv_heads, y.kv_heads);
  EXPECT_EQ(x.head_dim, y.head_dim);
  EXPECT_EQ(x.window, y.window);
  EXPECT_EQ(x.q_lora_rank, y.q_lora_rank);
  EXPECT_EQ(x.kv_lora_rank, y.kv_lora_rank);
  EXPECT_EQ(x.qk_nope_head_dim, y.qk_nope_head_dim);
  EXPECT_EQ(x.qk_rope_head_dim, y.qk_rope_head_dim);
  EXPECT_EQ(x.v_head_dim, y.v_head_dim);
  EXPECT_EQ(x.output_gate, y.output_gate);
  EXPECT_EQ(x.index_heads, y.index_heads);
  EXPECT_EQ(x.index_head_dim, y.index_head_dim);
  EXPECT_EQ(x.index_topk, y.index_topk);
}

class PresetFromConfig : public ::testing::TestWithParam<const char*> {};

TEST_P(PresetFromConfig, EqualsThePresetFieldByField) {
  const std::string name = GetParam();
  ModelSpec preset = model_presets().get(name).value;
  // Mixtral-8x7B-v0.1's config.json has sliding_window null; the preset keeps the 4K window of
  // the Mistral paper that MoE-GPS §4 and AMoE simulate.
  if (name == "mixtral-8x7b") preset.attention.window = 0;
  // The Qwen1.5 copy is of Qwen1.5-MoE-A2.7B-Chat (GPTQ-Int4) whose context is 32768; the base
  // model's config, the preset's source, says 8192 (tests/data/hf/SOURCES.md).
  if (name == "qwen1.5-moe-a2.7b") preset.max_context = 32768;
  SCOPED_TRACE(name);
  expect_same(read_config(name), preset);
}

INSTANTIATE_TEST_SUITE_P(Shipped, PresetFromConfig,
                         ::testing::Values("deepseek-v3", "deepseek-r1", "kimi-k2", "deepseek-v2-lite", "qwen3-235b-a22b",
                                           "qwen3-30b-a3b", "qwen1.5-moe-a2.7b", "mixtral-8x7b", "llama-4-maverick",
                                           "llama-4-scout", "gpt-oss-120b", "gpt-oss-20b", "minimax-m2.5", "llama-3.1-8b",
                                           "llama-3.1-70b", "qwen3-32b", "qwen3.5-397b-a17b", "glm-5"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-' || c == '.') c = '_';
                           return n;
                         });

// Published totals (model cards): total and activated parameters, within 2%. DeepSeek-V3/R1
// 671B/37B (without the 14B MTP module); Kimi-K2 1.04T/32.6B ("1T total, 32B activated");
// Qwen3-235B-A22B 235B/22B; Llama 4 Maverick 400B/17B and Scout 109B/17B (text and vision:
// the card's totals include the vision encoder, about 0.7B, inside the 2%); GPT-OSS-120B
// 116.83B/5.13B and 20B 20.9B/3.61B (OpenAI's model card; attention sinks and biases not
// counted). MiniMax-M2.5 229B/10B (MiniMax-M2's card: "230 billion total parameters with 10
// billion active"); Llama-3.1 8.03B and 70.6B, Qwen3-32B 32.8B (dense: active = total);
// Qwen3.5-397B-A17B 397B/17B (its name, in whole billions: we count 17.35B active; the vision
// tower, ~0.4B, is not counted); GLM-5 744B/40B
// (Z.ai's card; its 40B active leaves out both embedding matrices: we count 41.8B with them).
struct Published {
  const char* preset;
  double total_b, active_b;
  /// The card's active count leaves out the input embedding (a lookup, not a matmul): OpenAI's
  /// GPT-OSS card (5.13B = our count less vocab x hidden).
  bool active_without_embedding = false;
  /// The card's active count leaves out both embedding matrices (MiniMax's "10B activated": we
  /// count 11.0B with the input embedding and the LM head, 9.8B without them).
  bool active_without_embeddings = false;
  /// The card's active count is a whole number of billions (Qwen3.5's "A17B"): it stands for
  /// anything within half a billion, which the tolerance then admits where it exceeds 2%.
  bool active_whole_billions = false;
};

class PublishedCounts : public ::testing::TestWithParam<Published> {};

TEST_P(PublishedCounts, ConfigCountsMatchTheModelCard) {
  const Published p = GetParam();
  const ModelSpec m = read_config(p.preset);
  EXPECT_NEAR(m.total_params() / 1e9, p.total_b, 0.02 * p.total_b) << p.preset;
  const double table = static_cast<double>(m.vocab) * static_cast<double>(m.hidden);
  const double embedding = p.active_without_embeddings ? 2.0 * table : p.active_without_embedding ? table : 0.0;
  const double rounding = p.active_whole_billions ? 0.5 : 0.0;
  EXPECT_NEAR((m.active_params() - embedding) / 1e9, p.active_b, std::max(0.02 * p.active_b, rounding)) << p.preset;
}

INSTANTIATE_TEST_SUITE_P(ModelCards, PublishedCounts,
                         ::testing::Values(Published{"deepseek-v3", 671, 37}, Published{"kimi-k2", 1040, 32.6},
                                           Published{"qwen3-235b-a22b", 235, 22}, Published{"llama-4-maverick", 400, 17},
                                           Published{"llama-4-scout", 109, 17}, Published{"gpt-oss-120b", 116.8, 5.13, true},
                                           Published{"gpt-oss-20b", 20.9, 3.61, true},
                                           Published{"minimax-m2.5", 229, 10, false, true},
                                           Published{"llama-3.1-8b", 8.03, 8.03}, Published{"llama-3.1-70b", 70.6, 70.6},
                                           Published{"qwen3-32b", 32.8, 32.8},
                                           Published{"qwen3.5-397b-a17b", 397, 17, false, false, true},
                                           Published{"glm-5", 744, 40, false, true}),
                         [](const auto& info) {
                           std::string n = info.param.preset;
                           for (char& c : n)
                             if (c == '-' || c == '.') c = '_';
                           return n;
                         });

TEST(HfConfig, MissingFieldIsNamed) {
  nlohmann::json c = config_of("qwen3-235b-a22b");
  c.erase("moe_intermediate_size");
  const HfConfigRead r = model_from_hf_config(c, "x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find("moe_intermediate_size"), std::string::npos) << r.error;
}

// Kimi-K2.5's checkpoint: compressed-tensors INT4 weights in groups of 32, attention, shared
// experts and dense MLPs left out (moonshotai/Kimi-K2.5 config.json's quantization_config).
nlohmann::json kimi_int4() {
  nlohmann::json c = config_of("kimi-k2");
  c.erase("quantization_config");
  c["torch_dtype"] = "bfloat16";
  c["quantization_config"] = nlohmann::json::parse(R"({
    "quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
    "kv_cache_scheme": null,
    "config_groups": {"group_0": {"input_activations": null, "output_activations": null, "targets": ["Linear"],
      "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32, "symmetric": true}}},
    "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"]})");
  return c;
}

TEST(HfConfig, CompressedTensorsInt4IsWeightOnlyExperts) {
  const HfConfigRead r = model_from_hf_config(kimi_int4(), "kimi-k2.5");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.model.dtype, DType::kBf16);
  EXPECT_EQ(r.model.expert_weight_dtype(), DType::kInt4);
  EXPECT_TRUE(r.model.expert_weight_only);
  EXPECT_EQ(r.model.expert_compute_dtype(), DType::kBf16);
  // 4-bit values and a bf16 scale per 32: 4.5 bits, a quarter of the bf16 experts' bytes and more.
  EXPECT_DOUBLE_EQ(dtype_bytes(DType::kInt4), 0.5625);
  // What it does not map is refused, not priced as something else.
  for (const auto& [path, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"/quantization_config/config_groups/group_0/weights/group_size", 128},
           {"/quantization_config/config_groups/group_0/weights/num_bits", 8},
           {"/quantization_config/config_groups/group_0/input_activations", nlohmann::json::object()},
           {"/quantization_config/ignore", nlohmann::json::array({"lm_head"})}}) {
    nlohmann::json c = kimi_int4();
    c[nlohmann::json::json_pointer(path)] = value;
    const HfConfigRead bad = model_from_hf_config(c, "x");
    EXPECT_FALSE(bad.ok()) << path;
    EXPECT_NE(bad.error.find("compressed-tensors"), std::string::npos) << bad.error;
  }
}

TEST(HfConfig, WrongTypeIsNamed) {
  nlohmann::json c = config_of("kimi-k2");
  c["n_routed_experts"] = "384";
  const HfConfigRead r = model_from_hf_config(c, "x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find("n_routed_experts"), std::string::npos) << r.error;
}

TEST(HfConfig, UnknownArchitectureListsTheKnownOnes) {
  nlohmann::json c = config_of("qwen3-235b-a22b");
  c["architectures"] = {"FancyMoeForCausalLM"};
  const HfConfigRead r = model_from_hf_config(c, "x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find("FancyMoeForCausalLM"), std::string::npos);
  EXPECT_NE(r.error.find("Qwen3MoeForCausalLM"), std::string::npos);
}

TEST(HfConfig, IgnoredFieldsAreListed) {
  const HfConfigRead r = model_from_hf_config(config_of("qwen3-235b-a22b"), "x");
  ASSERT_TRUE(r.ok());
  EXPECT_NE(std::find(r.ignored.begin(), r.ignored.end(), "rope_theta"), r.ignored.end());
  EXPECT_EQ(std::find(r.ignored.begin(), r.ignored.end(), "hidden_size"), r.ignored.end());
}

TEST(HfConfig, QuantizationSetsTheExpertType) {
  EXPECT_EQ(read_config("gpt-oss-120b").expert_weight_dtype(), DType::kMxFp4);
  EXPECT_EQ(read_config("gpt-oss-120b").dtype, DType::kBf16);
  EXPECT_EQ(read_config("deepseek-r1").dtype, DType::kFp8);
  nlohmann::json c = config_of("deepseek-r1");
  c["quantization_config"] = {{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}};
  c.erase("torch_dtype");
  const HfConfigRead r = model_from_hf_config(c, "x");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.model.expert_weight_dtype(), DType::kNvFp4);
  c["quantization_config"] = {{"quant_method", "gptq"}};
  EXPECT_FALSE(model_from_hf_config(c, "x").ok());
}

TEST(HfConfig, InterleavedAttentionLayers) {
  const ModelSpec oss = read_config("gpt-oss-120b");
  EXPECT_EQ(oss.window_of_layer(0), 128);
  EXPECT_EQ(oss.window_of_layer(1), 0);
  const ModelSpec mav = read_config("llama-4-maverick");
  EXPECT_EQ(mav.window_of_layer(2), 8192);
  EXPECT_EQ(mav.window_of_layer(3), 0);
  EXPECT_FALSE(mav.is_moe_layer(0));
  EXPECT_TRUE(mav.is_moe_layer(1));
  EXPECT_EQ(mav.num_moe_layers(), 24);
}

}  // namespace
}  // namespace moesim
