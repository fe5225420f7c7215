// Operator lists in closed form: GEMM shapes and FLOPs, attention pairs under causality and
// sliding windows, grouped expert GEMMs skipping idle experts, KV-cache and token sizes.
#include <gtest/gtest.h>

#include <numeric>

#include "models/operators.hpp"

namespace moesim {
namespace {

const ModelSpec& preset(const std::string& name) { return model_presets().get(name).value; }

// Returns a reference into `ops`: bind it to a copy when `ops` is a temporary.
const Op& find(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops)
    if (name == op.name) return op;
  throw std::runtime_error("no op " + name);
}

bool has(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops)
    if (name == op.name) return true;
  return false;
}

// Brute-force count of (query, key) pairs a sequence attends over.
double brute_pairs(std::int64_t len, std::int64_t window, bool causal) {
  double n = 0;
  for (std::int64_t q = 0; q < len; ++q)
    for (std::int64_t k = 0; k < len; ++k) {
      if (causal && k > q) continue;
      if (window > 0 && (causal ? q - k >= window : false)) continue;
      ++n;
    }
  if (!causal && window > 0) return static_cast<double>(len) * std::min(len, window);
  return n;
}

TEST(Operators, GemmFlopsAreTwoMNK) {
  const Op g = make_gemm("x", 7, 11, 13, DType::kBf16);
  EXPECT_DOUBLE_EQ(g.flops, 2.0 * 7 * 11 * 13);
  const ModelSpec& m = preset("mixtral-8x7b");
  const auto ops = attention_ops(m, 2, 100);
  const Op& qkv = find(ops, "attn.qkv");
  EXPECT_EQ(qkv.m, 200);
  EXPECT_EQ(qkv.n, (32 + 2 * 8) * 128);
  EXPECT_EQ(qkv.k, 4096);
  EXPECT_DOUBLE_EQ(qkv.flops, 2.0 * 200 * (48 * 128) * 4096);
  const Op& out = find(ops, "attn.out");
  EXPECT_DOUBLE_EQ(out.flops, 2.0 * 200 * 4096 * 4096);
}

TEST(Operators, AttentionCausalPairsClosedForm) {
  ModelSpec m = preset("olmoe-1b-7b");  // MHA, causal, no window
  const std::int64_t L = 512, S = 3;
  const Op core = find(attention_ops(m, S, L), "attn.core");
  EXPECT_EQ(core.kind, OpKind::kAttention);
  const double pairs = L * (L + 1) / 2.0;
  EXPECT_DOUBLE_EQ(pairs, brute_pairs(L, 0, true));
  EXPECT_DOUBLE_EQ(core.flops, 4.0 * S * 16 * 128 * pairs);
  // Flash-attention bytes: Q, K, V read and O written once, no L×L matrix.
  EXPECT_DOUBLE_EQ(core.bytes, 2.0 * S * L * (16 * 128) * 4);
}

TEST(Operators, SlidingWindowAndEncoderPairs) {
  ModelSpec m = preset("mixtral-8x7b");
  m.attention.window = 64;
  for (std::int64_t L : {10, 64, 65, 300}) {
    const Op core = find(attention_ops(m, 1, L), "attn.core");
    EXPECT_DOUBLE_EQ(core.flops, 4.0 * 32 * 128 * brute_pairs(L, 64, true)) << L;
  }
  // Mixtral's 4K window does not bind below 4096 tokens; at 8192 it halves the far half.
  const ModelSpec& mx = preset("mixtral-8x7b");
  const double full = 8192.0 * 8193 / 2, windowed = 4096.0 * 4097 / 2 + 4096.0 * 4096;
  EXPECT_DOUBLE_EQ(find(attention_ops(mx, 1, 8192), "attn.core").flops, 4.0 * 32 * 128 * windowed);
  EXPECT_LT(windowed, full);
  // Switch encoder is bidirectional: every token sees every token.
  const Op enc = find(attention_ops(preset("switch-base-8"), 4, 120), "attn.core");
  EXPECT_DOUBLE_EQ(enc.flops, 4.0 * 4 * 12 * 64 * 120.0 * 120.0);
}

TEST(Operators, MlaProjections) {
  const ModelSpec& v3 = preset("deepseek-v3");
  const auto ops = attention_ops(v3, 1, 128);
  EXPECT_FALSE(has(ops, "attn.qkv"));
  EXPECT_EQ(find(ops, "attn.q_a").n, 1536);
  EXPECT_EQ(find(ops, "attn.q_b").n, 128 * 192);
  EXPECT_EQ(find(ops, "attn.kv_a").n, 512 + 64);
  EXPECT_EQ(find(ops, "attn.kv_b").n, 128 * (128 + 128));
  EXPECT_EQ(find(ops, "attn.out").k, 128 * 128);
  // Core: qk dim 192, v dim 128 → 2·(192+128) FLOPs per pair and head.
  EXPECT_DOUBLE_EQ(find(ops, "attn.core").flops, 2.0 * 128 * (128.0 * 129 / 2) * (192 + 128));
  const auto lite = attention_ops(preset("deepseek-v2-lite"), 1, 16);
  EXPECT_TRUE(has(lite, "attn.q"));
  EXPECT_FALSE(has(lite, "attn.q_a"));
  // Projection weights read by the ops equal the attention parameters (less norms).
  double weights = 0;
  for (const Op& op : ops)
    if (op.kind == OpKind::kGemm) weights += static_cast<double>(op.n) * op.k;
  EXPECT_DOUBLE_EQ(weights, v3.attention_params() - (2 * 7168 + 512 + 1536));
}

TEST(Operators, RouterAndCombine) {
  const ModelSpec& m = preset("qwen1.5-moe-a2.7b");
  const auto r = router_ops(m, 1000);
  const Op& gate = find(r, "router.gate");
  EXPECT_EQ(gate.n, 60);
  EXPECT_DOUBLE_EQ(gate.flops, 2.0 * 1000 * 60 * 2048);
  EXPECT_TRUE(has(r, "router.norm"));
  EXPECT_DOUBLE_EQ(find(r, "router.topk").bytes, 2.0 * 1000 * 60 * 2);
  const auto c = combine_ops(m, 1000);
  EXPECT_DOUBLE_EQ(find(c, "combine.weighted_sum").bytes, 2.0 * 1000 * 4 * 2048 * 2);
}

TEST(Operators, ExpertGroupedGemmSkipsIdleExperts) {
  const ModelSpec& m = preset("mixtral-8x7b");
  const std::vector<std::int64_t> tokens = {100, 0, 28};
  const auto ops = expert_ops(m, tokens);
  const Op& up = find(ops, "expert.up");
  EXPECT_EQ(up.kind, OpKind::kGroupedGemm);
  EXPECT_EQ(up.n, 2 * 14336);  // SwiGLU gate and up
  EXPECT_EQ(up.k, 4096);
  EXPECT_EQ(up.m, 128);
  EXPECT_EQ(up.batch, 2);  // the idle expert loads no weights
  EXPECT_DOUBLE_EQ(up.flops, 2.0 * 128 * 2 * 14336 * 4096);
  const Op& down = find(ops, "expert.down");
  EXPECT_EQ(down.n, 4096);
  EXPECT_EQ(down.k, 14336);
  // Weight bytes of the two grouped GEMMs = 2 experts' parameters.
  const double act = 2.0 * (128.0 * 4096 * 2 + 128.0 * 2 * 14336 + 128.0 * 14336);
  EXPECT_DOUBLE_EQ(up.bytes + down.bytes, 2 * m.expert_bytes() + act);
  EXPECT_TRUE(expert_ops(m, {0, 0}).empty());
  // ReLU experts: up has ffn columns only.
  EXPECT_EQ(find(expert_ops(preset("switch-base-8"), {5}), "expert.up").n, 3072);
}

TEST(Operators, SharedAndDenseFfn) {
  const ModelSpec& lite = preset("deepseek-v2-lite");
  const auto shared = shared_expert_ops(lite, 10);
  EXPECT_EQ(find(shared, "shared.up").n, 2 * 2 * 1408);
  EXPECT_EQ(find(shared, "shared.down").k, 2 * 1408);
  EXPECT_TRUE(shared_expert_ops(preset("mixtral-8x7b"), 10).empty());
  EXPECT_TRUE(shared_expert_ops(lite, 0).empty());
  const auto dense = dense_ffn_ops(lite, 10);
  EXPECT_EQ(find(dense, "ffn.up").n, 2 * 10944);
  EXPECT_DOUBLE_EQ(find(dense, "ffn.up").flops + find(dense, "ffn.down").flops, 2.0 * 10 * lite.dense_ffn_params());
  EXPECT_TRUE(has(dense, "ffn.norm"));
  EXPECT_TRUE(has(dense, "ffn.residual"));
}

TEST(Operators, TokenAndKvBytes) {
  EXPECT_DOUBLE_EQ(token_bytes(preset("mixtral-8x7b")), 4096.0 * 2);
  EXPECT_DOUBLE_EQ(token_bytes(preset("switch-base-128")), 768.0 * 4);
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token_layer(preset("mixtral-8x7b")), 2.0 * 8 * 128 * 2);
  // MLA caches the 512-dim latent plus the 64-dim rope key.
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token_layer(preset("deepseek-v2-lite")), 576.0 * 2);
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_token_layer(preset("deepseek-v3")), 576.0 * 1);
}

}  // namespace
}  // namespace moesim
