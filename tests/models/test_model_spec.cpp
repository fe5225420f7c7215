// Presets against the totals their model cards publish, the MoE-layer layout rule, and the
// parameter-count formulas in closed form.
#include <gtest/gtest.h>

#include "models/model_spec.hpp"

namespace moesim {
namespace {

const ModelSpec& preset(const std::string& name) { return model_presets().get(name).value; }

TEST(ModelNames, RoundTrip) {
  for (auto k : {AttentionKind::kMha, AttentionKind::kGqa, AttentionKind::kMqa, AttentionKind::kMla}) {
    AttentionKind back = AttentionKind::kMha;
    ASSERT_TRUE(parse_attention_kind(attention_kind_name(k), back));
    EXPECT_EQ(back, k);
  }
  for (auto a : {Activation::kRelu, Activation::kGelu, Activation::kSwiGlu}) {
    Activation back = Activation::kRelu;
    ASSERT_TRUE(parse_activation(activation_name(a), back));
    EXPECT_EQ(back, a);
  }
  AttentionKind k;
  Activation a;
  EXPECT_FALSE(parse_attention_kind("MHA ", k));
  EXPECT_FALSE(parse_activation("silu", a));
}

TEST(ModelPresets, AllRegisteredWithConsistentShapes) {
  const std::vector<std::string> expected = {
      "deepseek-r1",     "deepseek-v2-lite", "deepseek-v3",       "glm-5",           "gpt-oss-120b",    "gpt-oss-20b",
      "kimi-k2",         "llama-3.1-70b",    "llama-3.1-8b",      "llama-4-maverick", "llama-4-scout",
      "llama-moe",       "minimax-m2.5",     "mixtral-8x22b",     "mixtral-8x7b",    "olmoe-1b-7b",
      "qwen1.5-moe-a2.7b", "qwen3-235b-a22b", "qwen3-30b-a3b",    "qwen3-32b",       "qwen3.5-397b-a17b", "switch-base-128",
      "switch-base-256", "switch-base-64",   "switch-base-8"};
  EXPECT_EQ(model_presets().names(), expected);
  for (const auto* e : model_presets().entries()) {
    const ModelSpec& m = e->value;
    SCOPED_TRACE(e->name);
    EXPECT_EQ(m.name, e->name);
    EXPECT_FALSE(e->description.empty());
    // An MoE model has MoE layers and picks from its experts; a dense one (experts 0) neither.
    if (m.experts > 0) {
      EXPECT_GT(m.num_moe_layers(), 0);
      EXPECT_GE(m.top_k, 1);
      EXPECT_LE(m.top_k, m.experts);
    } else {
      EXPECT_EQ(m.num_moe_layers(), 0);
      EXPECT_EQ(m.top_k, 0);
      EXPECT_GT(m.dense_ffn, 0);
      EXPECT_DOUBLE_EQ(m.active_params(), m.total_params());
    }
    EXPECT_GT(m.attention.heads, 0);
    EXPECT_EQ(m.attention.heads % m.attention.kv_heads, 0);
  }
}

TEST(ModelPresets, UnknownNameListsValidOnes) {
  try {
    model_presets().get("mixtral-8x7");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("mixtral-8x7b"), std::string::npos) << msg;
  }
}

TEST(MoeLayers, SwitchEveryOtherLayerStartingAtOne) {
  const ModelSpec& m = preset("switch-base-128");
  for (int l = 0; l < m.layers; ++l) EXPECT_EQ(m.is_moe_layer(l), l % 2 == 1) << l;
  EXPECT_EQ(m.num_moe_layers(), 6);  // layers 1,3,...,11, as in switch_base_128_expert_counts.json
  EXPECT_FALSE(m.is_moe_layer(-1));
  EXPECT_FALSE(m.is_moe_layer(12));
}

TEST(MoeLayers, DeepSeekFirstLayersDense) {
  const ModelSpec& v3 = preset("deepseek-v3");
  for (int l = 0; l < 3; ++l) EXPECT_FALSE(v3.is_moe_layer(l));
  for (int l = 3; l < v3.layers; ++l) EXPECT_TRUE(v3.is_moe_layer(l));
  EXPECT_EQ(v3.num_moe_layers(), 58);
  EXPECT_EQ(preset("deepseek-v2-lite").num_moe_layers(), 26);
  EXPECT_EQ(preset("mixtral-8x7b").num_moe_layers(), 32);
}

TEST(ParamCounts, ExpertFormula) {
  // SwiGLU: gate, up, down. ReLU: up, down.
  EXPECT_DOUBLE_EQ(preset("mixtral-8x7b").expert_params(), 3.0 * 4096 * 14336);
  EXPECT_DOUBLE_EQ(preset("switch-base-8").expert_params(), 2.0 * 768 * 3072);
  // HarMoEny §V-A: "each expert is 18 MB" (Switch) and "33 MB" (Qwen) — fp32, in MiB.
  const double mib = 1024.0 * 1024.0;
  EXPECT_NEAR(preset("switch-base-128").expert_bytes() / mib, 18.0, 0.1);
  ModelSpec qwen_fp32 = preset("qwen1.5-moe-a2.7b");
  qwen_fp32.dtype = DType::kFp32;
  EXPECT_NEAR(qwen_fp32.expert_bytes() / mib, 33.0, 0.1);
}

TEST(ParamCounts, AttentionFormulas) {
  const ModelSpec& mx = preset("mixtral-8x7b");
  // q (4096·4096) + k, v (2·4096·1024) + o (4096·4096) + two norms.
  EXPECT_DOUBLE_EQ(mx.attention_params(), 4096.0 * 4096 * 2 + 2.0 * 4096 * 1024 + 2 * 4096);
  // DeepSeek-V3 MLA: q_a 7168·1536, q_b 1536·128·192, kv_a 7168·576, kv_b 512·128·256,
  // o 128·128·7168, norms 2·7168 + 512 + 1536.
  const double v3 = 7168.0 * 1536 + 1536.0 * 128 * 192 + 7168.0 * 576 + 512.0 * 128 * 256 + 128.0 * 128 * 7168 +
                    2 * 7168 + 512 + 1536;
  EXPECT_DOUBLE_EQ(preset("deepseek-v3").attention_params(), v3);
  // V2-Lite has no q compression: q = 2048·16·192.
  const double lite = 2048.0 * 16 * 192 + 2048.0 * 576 + 512.0 * 16 * 256 + 16.0 * 128 * 2048 + 2 * 2048 + 512;
  EXPECT_DOUBLE_EQ(preset("deepseek-v2-lite").attention_params(), lite);
}

struct Published {
  const char* name;
  double total_b;     // total parameters in billions, from the model card
  double active_b;    // activated parameters in billions (0: not published)
  double tolerance;   // relative
};

// Totals from the model cards / papers: Mixtral 46.7B (12.9B active), Mixtral 8x22B 141B (39B),
// Qwen1.5-MoE 14.3B (2.7B), OLMoE 6.9B (1.3B), DeepSeek-V2-Lite 15.7B, DeepSeek-V3 671B
// (37B; the 14B MTP module excluded), Qwen3-30B-A3B 30.5B (3.3B), LLaMA-MoE-3.5B: LLaMA-2-7B's
// 6.74B total (3.5B active). Cards round to 2-3 digits, so 1-2% tolerances. DeepSeek-V2-Lite's
// "2.4B activated" leaves out an embedding matrix (we count 2.66B with both), so only its total
// is checked.
class PublishedTotals : public ::testing::TestWithParam<Published> {};

TEST_P(PublishedTotals, WithinTolerance) {
  const Published& p = GetParam();
  const ModelSpec& m = preset(p.name);
  EXPECT_NEAR(m.total_params() / 1e9, p.total_b, p.total_b * p.tolerance);
  if (p.active_b > 0) {
    EXPECT_NEAR(m.active_params() / 1e9, p.active_b, p.active_b * 0.04);
  }
  EXPECT_LT(m.non_expert_params(), m.total_params());
}

INSTANTIATE_TEST_SUITE_P(Presets, PublishedTotals,
                         ::testing::Values(Published{"mixtral-8x7b", 46.7, 12.9, 0.01},
                                           Published{"mixtral-8x22b", 141.0, 39.0, 0.01},
                                           Published{"qwen1.5-moe-a2.7b", 14.3, 2.7, 0.01},
                                           Published{"olmoe-1b-7b", 6.9, 1.3, 0.01},
                                           Published{"deepseek-v2-lite", 15.7, 0.0, 0.01},
                                           Published{"deepseek-v3", 671.0, 37.0, 0.02},
                                           Published{"qwen3-30b-a3b", 30.5, 3.3, 0.01},
                                           Published{"llama-moe", 6.74, 3.5, 0.01}),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(ParamCounts, SwitchEncoderClosedForm) {
  // The published 7.4B of switch-base-128 counts encoder and decoder (12 sparse layers); the
  // preset is the 12-layer encoder HarMoEny and MoEShard serve: 6 sparse layers.
  const ModelSpec& m = preset("switch-base-128");
  const double expert = 2.0 * 768 * 3072;
  const double attention = 4.0 * 768 * 768 + 2 * 768;
  const double expected = 6 * 128 * expert + 6 * expert /*dense FFNs*/ + 12 * attention + 6 * 768.0 * 128 /*routers*/ +
                          32128.0 * 768 /*one embedding*/ + 768 /*final norm*/;
  EXPECT_DOUBLE_EQ(m.total_params(), expected);
  EXPECT_NEAR(m.total_params() / 1e9, 7.4 / 2, 7.4 / 2 * 0.03);
}

TEST(ParamCounts, NonExpertPartsAddUp) {
  const ModelSpec& m = preset("deepseek-v2-lite");
  const double expected = 27 * m.attention_params() + 26 * (2048.0 * 64 + 2 * 3.0 * 2048 * 1408) +
                          1 * 3.0 * 2048 * 10944 + 2 * 102400.0 * 2048 + 2048;
  EXPECT_DOUBLE_EQ(m.non_expert_params(), expected);
  EXPECT_DOUBLE_EQ(m.total_params(), expected + 26 * 64 * m.expert_params());
}

}  // namespace
}  // namespace moesim
